-- quota.lua — quota policies and admission (tag {q:K}) (contract §5.36–§5.38).
--
-- Keys touched (all passed in KEYS):
--   Q                         ff:quota:{q:K}:<id>                        HASH policy definition
--   Q:window:<dim>            ff:quota:{q:K}:<id>:window:<dim>           ZSET eid, score admission ms
--   Q:concurrency             ff:quota:{q:K}:<id>:concurrency            STRING in-flight count
--   Q:admitted:<eid>          ff:quota:{q:K}:<id>:admitted:<eid>         STRING "1" PX window
--   Q:admitted_set            ff:quota:{q:K}:<id>:admitted_set           SET admitted eids
--   quota_policies            ff:idx:{q:K}:quota_policies                SET policy ids
--
-- ff_create_quota_policy (KEYS 5, ARGV 5)
--   KEYS[1] Q · KEYS[2] Q:window:requests_per_window (unused) · KEYS[3] Q:concurrency
--   KEYS[4] Q:admitted_set (unused) · KEYS[5] quota_policies
--   ARGV[1] quota_policy_id · ARGV[2] window_seconds · ARGV[3] max_requests_per_window
--   ARGV[4] max_concurrent · ARGV[5] now_ms (all stored verbatim)
--   -> {1, "OK", id} | {1, "ALREADY_SATISFIED", id}
--
-- ff_check_admission_and_record (KEYS 5, ARGV 6) — replies carry no integer status
--   KEYS[1] Q:window:requests_per_window · KEYS[2] Q:concurrency · KEYS[3] Q (unused)
--   KEYS[4] Q:admitted:<eid> · KEYS[5] Q:admitted_set
--   ARGV[1] now_ms (caller now) · ARGV[2] window_seconds · ARGV[3] rate_limit (0 = unlimited)
--   ARGV[4] concurrency_cap (0 = unlimited) · ARGV[5] execution_id · ARGV[6] jitter_ms (absent -> 0)
--   -> {"ADMITTED"} | {"ALREADY_ADMITTED"} | {"RATE_EXCEEDED", retry_after_ms} | {"CONCURRENCY_EXCEEDED"}
--      | {0, "invalid_input", msg}
--
-- ff_release_admission (KEYS 3, ARGV 1)
--   KEYS[1] Q:admitted:<eid> · KEYS[2] Q:admitted_set · KEYS[3] Q:concurrency
--   ARGV[1] execution_id
--   -> {1, "OK", "released"}

do
  redis.register_function('ff_create_quota_policy', function(keys, args)
    local def_key, concurrency_key, policies_key = keys[1], keys[3], keys[5]
    local policy_id = args[1]
    local window_seconds = args[2]
    local max_requests = args[3]
    local max_concurrent = args[4]
    local now_ms = args[5]

    if redis.call('EXISTS', def_key) == 1 then
      return {1, 'ALREADY_SATISFIED', policy_id}
    end
    redis.call('HSET', def_key,
      'quota_policy_id', policy_id,
      'requests_per_window_seconds', window_seconds,
      'max_requests_per_window', max_requests,
      'active_concurrency_cap', max_concurrent,
      'created_at', now_ms)
    redis.call('SET', concurrency_key, '0')
    redis.call('SADD', policies_key, policy_id)
    return ff_ok(policy_id)
  end)

  redis.register_function('ff_check_admission_and_record', function(keys, args)
    local window_key, concurrency_key = keys[1], keys[2]
    local admitted_key, admitted_set_key = keys[4], keys[5]
    local now_raw, window_raw, rate_raw, cap_raw = args[1], args[2], args[3], args[4]
    local execution_id = args[5]
    local jitter_raw = args[6] or '0'

    local bad = ff_require_number(now_raw, 'now_ms')
      or ff_require_number(window_raw, 'window_seconds')
      or ff_require_number(rate_raw, 'rate_limit')
      or ff_require_number(cap_raw, 'concurrency_cap')
    if bad then return bad end
    local now = tonumber(now_raw)
    local window_ms = tonumber(window_raw) * 1000
    local rate_limit = tonumber(rate_raw)
    local cap = tonumber(cap_raw)

    if redis.call('EXISTS', admitted_key) == 1 then
      return {'ALREADY_ADMITTED'}
    end

    -- The whole decision is taken on the not-yet-pruned window (counting only entries the
    -- prune would keep), so every raise happens before the first write.
    local cutoff = string.format('%.17g', now - window_ms)
    local verdict
    if rate_limit > 0 then
      local in_window = redis.call('ZCOUNT', window_key, '(' .. cutoff, '+inf')
      if in_window >= rate_limit then
        local jitter = tonumber(jitter_raw)
        if jitter == nil then
          error('ff_check_admission_and_record: jitter_ms must be a number')
        end
        local oldest = redis.call('ZRANGEBYSCORE', window_key, '(' .. cutoff, '+inf',
          'WITHSCORES', 'LIMIT', 0, 1)
        local retry_after = tonumber(oldest[2]) + window_ms - now
        if retry_after < 0 then retry_after = 0 end
        if jitter > 0 then
          retry_after = retry_after + math.random(0, math.floor(jitter))
        end
        verdict = {'RATE_EXCEEDED', ff_int_text(retry_after)}
      end
    end
    if not verdict and cap > 0 then
      local in_flight = tonumber(redis.call('GET', concurrency_key)) or 0
      if in_flight >= cap then
        verdict = {'CONCURRENCY_EXCEEDED'}
      end
    end
    if not verdict then
      if execution_id == nil then
        error('ff_check_admission_and_record: missing execution_id')
      end
      if window_ms > 0 and window_ms ~= math.floor(window_ms) then
        error('ff_check_admission_and_record: window_seconds * 1000 must be a whole number of ms')
      end
    end

    redis.call('ZREMRANGEBYSCORE', window_key, '-inf', cutoff)
    if verdict then return verdict end

    redis.call('ZADD', window_key, now, execution_id)
    if window_ms > 0 then
      redis.call('SET', admitted_key, '1', 'PX', window_ms, 'NX')
    end
    if cap > 0 then
      redis.call('INCR', concurrency_key)
    end
    redis.call('SADD', admitted_set_key, execution_id)
    return {'ADMITTED'}
  end)

  redis.register_function('ff_release_admission', function(keys, args)
    local admitted_key, admitted_set_key, concurrency_key = keys[1], keys[2], keys[3]
    local execution_id = args[1]

    if execution_id == nil then
      error('ff_release_admission: missing execution_id')
    end
    redis.call('DEL', admitted_key)
    redis.call('SREM', admitted_set_key, execution_id)
    -- Never drive the counter negative (release without a matching admission).
    if (tonumber(redis.call('GET', concurrency_key)) or 0) > 0 then
      redis.call('DECR', concurrency_key)
    end
    return ff_ok('released')
  end)
end
