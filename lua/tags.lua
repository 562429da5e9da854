-- tags.lua — labels written after create: ff_set_execution_tags, ff_set_flow_tags (operations §3.2, §8.5).
-- Our additions beside the 47 contract functions, under upstream's names and KEYS/ARGV orders.
--
-- Keys touched:
--   E:core   ff:exec:{fp:N}:<eid>:core      HASH  last_mutation_at (W), existence (R)
--   E:tags   ff:exec:{fp:N}:<eid>:tags      HASH  <caller>.<field> -> value (W)
--   F:core   ff:flow:{fp:N}:<fid>:core      HASH  last_mutation_at, tags_migrated (W); legacy dotted fields (moved out)
--   F:tags   ff:flow:{fp:N}:<fid>:tags      HASH  <caller>.<field> -> value (W)
--
-- Tag key rule (both functions): a-z, then a-z 0-9 _, then a dot, then a character that is not a dot
-- (`<caller>.<field>`; the engine's own fields are dot-free). Every key is checked before the first write:
-- one bad key writes nothing.
--
-- ff_set_execution_tags (KEYS 2, ARGV 2P)
--   KEYS[1] E:core · KEYS[2] E:tags
--   ARGV[2i-1] tag key i · ARGV[2i] tag value i
--   -> {1, "OK", pair count} | {0, "invalid_input", msg} | {0, "execution_not_found"}
--      | {0, "invalid_tag_key", key}
--
-- ff_set_flow_tags (KEYS 2, ARGV 2P)
--   KEYS[1] F:core · KEYS[2] F:tags
--   ARGV as ff_set_execution_tags. The first call on a flow moves any dotted (`<caller>.<field>`) fields an
--   older writer left on F:core into F:tags and sets F:core tags_migrated = "1" (later calls skip the scan).
--   -> {1, "OK", pair count} | {0, "invalid_input", msg} | {0, "flow_not_found"} | {0, "invalid_tag_key", key}

do
  local function is_tag_key(k)
    return type(k) == 'string' and string.find(k, '^[a-z][a-z0-9_]*%.[^%.]') ~= nil
  end

  -- Shared checks: returns an error reply, or nil when ARGV is a non-empty list of valid pairs.
  local function check_pairs(args)
    local n = #args
    if n == 0 or n % 2 ~= 0 then
      return ff_err('invalid_input', 'tags must be a non-empty list of key/value pairs')
    end
    for i = 1, n, 2 do
      if not is_tag_key(args[i]) then
        return ff_err('invalid_tag_key', args[i])
      end
    end
    return nil
  end

  redis.register_function('ff_set_execution_tags', function(keys, args)
    local core_key, tags_key = keys[1], keys[2]
    local bad = check_pairs(args)
    if bad then return bad end
    if redis.call('EXISTS', core_key) == 0 then
      return ff_err('execution_not_found')
    end
    redis.call('HSET', tags_key, unpack(args))
    redis.call('HSET', core_key, 'last_mutation_at', ff_int_text(ff_now()))
    return ff_ok(ff_int_text(#args / 2))
  end)

  redis.register_function('ff_set_flow_tags', function(keys, args)
    local fcore_key, ftags_key = keys[1], keys[2]
    local bad = check_pairs(args)
    if bad then return bad end
    if redis.call('EXISTS', fcore_key) == 0 then
      return ff_err('flow_not_found')
    end
    if redis.call('HGET', fcore_key, 'tags_migrated') ~= '1' then
      local flat = redis.call('HGETALL', fcore_key)
      local moved, names = {}, {}
      for i = 1, #flat, 2 do
        if is_tag_key(flat[i]) then
          moved[#moved + 1] = flat[i]
          moved[#moved + 1] = flat[i + 1]
          names[#names + 1] = flat[i]
        end
      end
      if #moved > 0 then
        redis.call('HSET', ftags_key, unpack(moved))
        redis.call('HDEL', fcore_key, unpack(names))
      end
      redis.call('HSET', fcore_key, 'tags_migrated', '1')
    end
    redis.call('HSET', ftags_key, unpack(args))
    redis.call('HSET', fcore_key, 'last_mutation_at', ff_int_text(ff_now()))
    return ff_ok(ff_int_text(#args / 2))
  end)
end
