-- stream.lua — attempt output streams (contract §5.29–§5.30).
--
-- Keys touched (all passed in KEYS, tag {fp:N}):
--   E:core        ff:exec:{fp:N}:<eid>:core            (read only: lease / attempt checks)
--   S(i)          ff:stream:{fp:N}:<eid>:<i>           STREAM of frames
--   S(i):meta     ff:stream:{fp:N}:<eid>:<i>:meta      HASH, created lazily by the first append
--
-- ff_append_frame (KEYS 3, ARGV 13)
--   KEYS[1] E:core · KEYS[2] S(i) · KEYS[3] S(i):meta
--   ARGV[1] execution_id · ARGV[2] attempt_index (must equal current_attempt_index)
--   ARGV[3] lease_id · ARGV[4] lease_epoch · ARGV[5] frame_type
--   ARGV[6] ts ("" -> server now; stored verbatim) · ARGV[7] payload (absent -> "")
--   ARGV[8] encoding (absent -> utf8) · ARGV[9] correlation_id (absent -> ""; stored when non-empty)
--   ARGV[10] source (absent -> worker) · ARGV[11] retention_maxlen (absent -> 0; 0 = MAXLEN ~ 10000)
--   ARGV[12] attempt_id (absent -> ""; meta only) · ARGV[13] max_payload_bytes (absent -> 65536)
--   ARGV[14..19] upstream v0.13's stream-mode knobs (read by upstream only; ours pass "")
--   ARGV[20] metadata_json (ours; absent/"" -> none): stored as the frame's own `metadata_json` field, so a
--   frame carries both it and a correlation id (v0.2.0's SDK had one field for both). A 13-ARGV call is as before.
--   -> {1, "OK", <entry_id>, <frame_count>}
--
-- ff_read_attempt_stream (KEYS 2, ARGV 3) — read-only
--   KEYS[1] S(i) · KEYS[2] S(i):meta
--   ARGV[1] from_id (absent -> "-") · ARGV[2] to_id (absent -> "+") · ARGV[3] count_limit (1..10000)
--   -> {1, "OK", <XRANGE entries>, <closed_at or "">, <closed_reason or "">}
--
-- ff_read_summary (KEYS 1, ARGV 0) — read-only; upstream v0.13's name and reply shape
--   KEYS[1] S(i):summary  ff:stream:{fp:N}:<eid>:<i>:summary  HASH document, version, patch_kind,
--           last_updated_ms, first_applied_ms (written by upstream's summary-mode appends; ours writes none)
--   -> {1, "OK", document, version, patch_kind, last_updated_ms, first_applied_ms}; no hash ->
--      {1, "OK", "", "0", "", "0", "0"}

do
  redis.register_function('ff_append_frame', function(keys, args)
    local core_key, stream_key, meta_key = keys[1], keys[2], keys[3]
    local execution_id = args[1]
    local attempt_index = args[2]
    local lease_id = args[3]
    local lease_epoch = args[4]
    local frame_type = args[5]
    local ts = args[6]
    local payload = args[7] or ''
    local encoding = args[8] or 'utf8'
    local correlation_id = args[9] or ''
    local source = args[10] or 'worker'
    local retention_raw = args[11]
    local attempt_id = args[12] or ''
    local max_payload_bytes = tonumber(args[13] or 65536)
    local metadata_json = args[20] or ''

    -- Upstream raises on a non-numeric limit too (§10 row 6); here it is the very first thing.
    if max_payload_bytes == nil then
      error('ff_append_frame: max_payload_bytes must be a number')
    end
    if #payload > max_payload_bytes then
      return ff_err('retention_limit_exceeded')
    end

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'ownership_state', 'lease_expires_at',
      'current_attempt_index', 'current_lease_id', 'current_lease_epoch')
    -- A missing core reads as lifecycle false, so it is "closed" as well.
    if c[1] ~= 'active' then
      return ff_err('stream_closed')
    end
    if c[2] == 'lease_expired_reclaimable' or c[2] == 'lease_revoked' then
      return ff_err('stale_owner_cannot_append')
    end
    local now = ff_now()
    if (tonumber(c[3]) or 0) <= now then
      return ff_err('stale_owner_cannot_append')
    end
    if c[4] ~= attempt_index or c[5] ~= lease_id or c[6] ~= lease_epoch then
      return ff_err('stale_owner_cannot_append')
    end

    local m = redis.call('HMGET', meta_key, 'closed_at', 'frame_count', 'total_bytes')
    local fresh = false
    if m[1] == false then
      -- closed_at is always written at creation, so a missing field means a missing meta
      -- (EXISTS only guards against a foreign, partial meta hash).
      fresh = redis.call('EXISTS', meta_key) == 0
    elseif m[1] ~= '' then
      return ff_err('stream_closed')
    end

    -- Validate the trim setting before the first write (upstream raises after appending).
    local retention_maxlen = tonumber(retention_raw or 0)
    if retention_maxlen == nil then
      error('ff_append_frame: retention_maxlen must be a number')
    end
    if execution_id == nil or frame_type == nil then
      error('ff_append_frame: missing execution_id / frame_type')
    end

    if ff_empty(ts) then ts = now end
    -- XADD trims in the same call: exact MAXLEN for a caller limit, approximate 10000 otherwise.
    local xadd
    if retention_maxlen > 0 then
      xadd = {'XADD', stream_key, 'MAXLEN', '=', retention_maxlen, '*'}
    else
      xadd = {'XADD', stream_key, 'MAXLEN', '~', 10000, '*'}
    end
    xadd[7], xadd[8] = 'frame_type', frame_type
    xadd[9], xadd[10] = 'ts', ts
    xadd[11], xadd[12] = 'payload', payload
    xadd[13], xadd[14] = 'encoding', encoding
    xadd[15], xadd[16] = 'source', source
    if correlation_id ~= '' then
      xadd[17], xadd[18] = 'correlation_id', correlation_id
    end
    if metadata_json ~= '' then
      local n = #xadd
      xadd[n + 1], xadd[n + 2] = 'metadata_json', metadata_json
    end
    local entry_id = redis.call(unpack(xadd))

    -- One HSET carries both the lazy creation and the per-frame counters.
    local frame_count = (tonumber(m[2]) or 0) + 1
    local total_bytes = (tonumber(m[3]) or 0) + #payload
    if fresh then
      redis.call('HSET', meta_key,
        'stream_id', execution_id .. ':' .. attempt_index,
        'execution_id', execution_id,
        'attempt_id', attempt_id,
        'attempt_index', attempt_index,
        'created_at', now,
        'closed_at', '',
        'closed_reason', '',
        'durability_mode', 'durable_full',
        'retention_maxlen', retention_maxlen,
        'frame_count', frame_count,
        'total_bytes', total_bytes,
        'last_sequence', entry_id,
        'last_frame_at', now)
    else
      redis.call('HSET', meta_key,
        'frame_count', frame_count,
        'total_bytes', total_bytes,
        'last_sequence', entry_id,
        'last_frame_at', now)
    end
    return ff_ok(entry_id, tostring(frame_count))
  end)

  redis.register_function('ff_read_attempt_stream', function(keys, args)
    local stream_key, meta_key = keys[1], keys[2]
    local from_id = args[1] or '-'
    local to_id = args[2] or '+'
    local count_limit = tonumber(args[3])

    if count_limit == nil or count_limit < 1 then
      return ff_err('invalid_input', 'count_limit must be >= 1')
    end
    if count_limit > 10000 then
      return ff_err('invalid_input', 'count_limit_exceeds_hard_cap')
    end

    local entries = redis.call('XRANGE', stream_key, from_id, to_id, 'COUNT', count_limit)
    local m = redis.call('HMGET', meta_key, 'closed_at', 'closed_reason')
    return ff_ok(entries, m[1] or '', m[2] or '')
  end)

  redis.register_function('ff_read_summary', function(keys)
    local h = redis.call('HMGET', keys[1], 'document', 'version', 'patch_kind', 'last_updated_ms',
      'first_applied_ms')
    -- Missing fields read as upstream's zero values, so an absent hash and a partial one answer alike.
    return ff_ok(h[1] or '', h[2] or '0', h[3] or '', h[4] or '0', h[5] or '0')
  end)
end
