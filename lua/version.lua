-- version.lua — library identity.
--
-- ff_version        KEYS 0, ARGV 0 -> bulk string "6": the v0.2.0 contract version. Upstream
--                   clients compare it and would replace our library if it differed.
-- ff_build_version  KEYS 0, ARGV 0 -> bulk string: this library's own build version (ours).

redis.register_function('ff_version', function(keys, args)
  return '6'
end)

redis.register_function('ff_build_version', function(keys, args)
  return 'ffpy-0.1.0'
end)
