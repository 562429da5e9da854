-- signal.lua — signal delivery to waitpoints, buffering for pending waitpoints, and the claim path
-- for an execution resumed on its interrupted attempt. Uses `ff_wp` (HMAC tokens, resume-condition
-- matching, resume field set) from suspension.lua; defines `ff_resumed_claim_writes` and `ff_deliver`,
-- shared with fastpath.lua.
--
-- Keys touched (contract §3): E:core, E:signals, E:suspension:current, E:claim_grant, E:lease:current,
-- E:lease:history, A(i), W(w), W(w):signals, W(w):condition, G(s), G(s):payload,
-- ff:sigdedup:{fp:N}:<w>:<key>, SEC (read), L:eligible, L:delayed, L:suspended, L:active,
-- I:suspension_timeout, I:lease_expiry, I:worker:<wiid>:leases, I:attempt_timeout.
--
-- ff_deliver_signal (14 KEYS / 18 ARGV; v0.13+: a 15th KEY, ff:part:{fp:N}:signal_delivery, gets one entry per
-- accepted signal: signal_id, execution_id, waitpoint_id, source_identity, effect, delivered_at_ms)
--   KEYS: 1 E:core · 2 W(w):condition · 3 W(w):signals · 4 E:signals · 5 G(s) · 6 G(s):payload ·
--         7 sigdedup key or NOOP · 8 W(w) · 9 E:suspension:current · 10 L:eligible · 11 L:suspended ·
--         12 L:delayed · 13 I:suspension_timeout · 14 SEC
--   ARGV: 1 signal_id · 2 execution_id · 3 waitpoint_id · 4 signal_name · 5 signal_category ·
--         6 source_type · 7 source_identity · 8 payload ("" = none) · 9 payload_encoding (absent -> json) ·
--         10 idempotency_key ("" = no dedup) · 11 correlation_id · 12 target_scope (absent -> waitpoint) ·
--         13 created_at ("" -> now) · 14 dedup_ttl_ms (absent -> 86400000; ""/0 = no dedup) ·
--         15 resume_delay_ms (absent -> 0) · 16 signal_maxlen (absent -> 1000) ·
--         17 max_signals_per_execution (absent -> 10000; 0 = unlimited) · 18 waitpoint_token
-- ff_buffer_signal_for_pending_waitpoint (9 KEYS / 18 ARGV)
--   KEYS: 1 E:core · 2 W(w):condition (unused) · 3 W(w):signals · 4 E:signals · 5 G(s) · 6 G(s):payload ·
--         7 sigdedup key or NOOP · 8 W(w) · 9 SEC
--   ARGV: as ff_deliver_signal (15 ignored)
-- ff_claim_resumed_execution (11 KEYS / 8 ARGV)
--   KEYS: 1 E:core · 2 E:claim_grant · 3 L:eligible · 4 I:lease_expiry · 5 I:worker:<wiid>:leases ·
--         6 A(current) · 7 E:lease:current · 8 E:lease:history · 9 L:active · 10 I:attempt_timeout ·
--         11 I:execution_deadline (unused)
--   ARGV: 1 execution_id · 2 worker_id · 3 worker_instance_id · 4 lane · 5 capability_snapshot_hash (unused) ·
--         6 lease_id · 7 lease_ttl_ms · 8 remaining_attempt_timeout_ms ("" = none)

-- ff_claim_resumed_execution's writes once the claim is validated — grant consumed, the interrupted
-- attempt resumed under a new lease (epoch + 1), core, indexes, history — shared with the fast path
-- (fastpath.lua), so its claims of an attempt_interrupted execution are the contract's writes by
-- construction. `k` names the keys (core, grant, attempt, lease, history, eligible, lease_expiry,
-- worker_leases, active, attempt_timeout); `a` the claim: eid, worker_id, wiid, lane, lease_id, now,
-- ttl (whole ms), remaining (attempt timeout ms left, or nil: none) and no_grant (the fast path read
-- that no grant exists: no DEL); `core` the current_lease_epoch, current_attempt_id and
-- current_attempt_index read. Returns epoch, expires_at, attempt id, attempt index.
local function ff_resumed_claim_writes(k, core, a)
  local now, ttl, eid = a.now, a.ttl, a.eid
  local epoch = (tonumber(core.current_lease_epoch) or 0) + 1
  local expires = now + ttl
  local renewal_deadline = now + math.floor(ttl * 2 / 3)
  local attempt_id, attempt_index = core.current_attempt_id or '', core.current_attempt_index or ''
  if not a.no_grant then redis.call('DEL', k.grant) end
  redis.call('HSET', k.attempt, 'attempt_state', 'started', 'resumed_at', now, 'lease_id', a.lease_id,
    'lease_epoch', epoch, 'worker_id', a.worker_id, 'worker_instance_id', a.wiid, 'suspended_at', '',
    'suspension_id', '')
  redis.call('DEL', k.lease)
  redis.call('HSET', k.lease, 'lease_id', a.lease_id, 'lease_epoch', epoch, 'execution_id', eid,
    'attempt_id', attempt_id, 'worker_id', a.worker_id, 'worker_instance_id', a.wiid, 'acquired_at', now,
    'expires_at', expires, 'last_renewed_at', now, 'renewal_deadline', renewal_deadline)
  redis.call('HSET', k.core, 'lifecycle_phase', 'active', 'ownership_state', 'leased',
    'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
    'terminal_outcome', 'none', 'attempt_state', 'running_attempt', 'public_state', 'active',
    'current_lease_id', a.lease_id, 'current_lease_epoch', epoch, 'current_worker_id', a.worker_id,
    'current_worker_instance_id', a.wiid, 'current_lane', a.lane, 'lease_acquired_at', now,
    'lease_expires_at', expires, 'lease_last_renewed_at', now, 'lease_renewal_deadline', renewal_deadline,
    'lease_expired_at', '', 'lease_revoked_at', '', 'lease_revoke_reason', '',
    'last_transition_at', now, 'last_mutation_at', now)
  redis.call('ZREM', k.eligible, eid)
  redis.call('ZADD', k.lease_expiry, expires, eid)
  redis.call('SADD', k.worker_leases, eid)
  redis.call('ZADD', k.active, expires, eid)
  if a.remaining then redis.call('ZADD', k.attempt_timeout, now + a.remaining, eid) end
  ff_history(k.history, 1000, 'acquired', {
    'lease_id', a.lease_id, 'lease_epoch', epoch, 'attempt_index', attempt_index,
    'attempt_id', attempt_id, 'worker_id', a.worker_id, 'reason', 'claim_resumed', 'ts', now,
  })
  return epoch, expires, attempt_id, attempt_index
end

-- The body of ff_deliver_signal with its keys by name (core, condition, wp_signals, exec_signals,
-- signal, payload, idem, wp, susp, eligible, suspended, delayed, susp_timeout, sec); shared with
-- fastpath.lua's ff_deliver_signal_fast, which leaves the three lane keys nil: they are then built from
-- E:core's lane, read only when the signal wakes the execution (k.lane is set then). k.eligible_now is
-- set when the execution was made eligible at once (no resume delay).
local ff_deliver

-- v0.13+ callers pass the partition's signal-delivery stream (ff_deliver_signal's 15th key): one entry per
-- accepted signal — what upstream's signal-delivery subscribers block on — capped like upstream's at ~1000.
local function ff_note_delivery(stream_key, args, reply)
  if stream_key and type(reply) == 'table' and reply[1] == 1 and reply[2] == 'OK' then
    redis.call('XADD', stream_key, 'MAXLEN', '~', 1000, '*', 'signal_id', args[1], 'execution_id', args[2],
      'waitpoint_id', args[3], 'source_identity', args[7] or '', 'effect', reply[4] or '',
      'delivered_at_ms', ff_now())
  end
end

do
  -- ARGV common to deliver and buffer, with the contract's defaults.
  local function signal_args(args)
    local a = {
      signal_id = args[1], eid = args[2], waitpoint_id = args[3],
      name = args[4] or '', category = args[5] or '', source_type = args[6] or '',
      source_identity = args[7] or '', payload = args[8] or '', encoding = args[9] or 'json',
      idem = args[10] or '', correlation_id = args[11] or '', scope = args[12] or 'waitpoint',
      created_at = args[13], token = args[18] or '',
    }
    -- Whole milliseconds; "", non-numeric and < 1 ms all mean "no dedup".
    local ttl = 86400000
    if args[14] ~= nil then ttl = tonumber(args[14]) end
    a.dedup_ttl = ttl and math.floor(ttl) or 0
    a.resume_delay = args[15]
    return a
  end

  -- ARGV 16 / 17 must be numeric (upstream raises); checked before the first write.
  local function stream_limits(args)
    local maxlen, max_signals = 1000, 10000
    if args[16] ~= nil then
      maxlen = tonumber(args[16])
      if not maxlen then error('signal_maxlen must be a number') end
    end
    if args[17] ~= nil then
      max_signals = tonumber(args[17])
      if not max_signals then error('max_signals_per_execution must be a number') end
    end
    return maxlen, max_signals
  end

  -- Token check; a failure is stamped on E:core (kept: error with side effects) and returned.
  local function authenticate(core_key, sec_key, a, wp_key_value, wp_created_at, now)
    local code = ff_wp.verify(sec_key, a.token, a.waitpoint_id, wp_key_value or '', wp_created_at, now)
    if code then
      redis.call('HSET', core_key, 'last_hmac_validation_failed_at', now)
      return ff_err(code)
    end
    return nil
  end

  -- Per-execution cap, then idempotency (SET NX reserves the key for this signal id).
  -- Returns an error / DUPLICATE reply, or nil to proceed.
  local function admit(exec_signals_key, idem_key, a, max_signals)
    if max_signals > 0 and redis.call('ZCARD', exec_signals_key) >= max_signals then
      return ff_err('signal_limit_exceeded')
    end
    if a.idem ~= '' and a.dedup_ttl > 0 then
      local existing = redis.call('GET', idem_key)
      if existing then return {1, 'DUPLICATE', existing} end
      redis.call('SET', idem_key, a.signal_id, 'PX', a.dedup_ttl, 'NX')
    end
    return nil
  end

  -- Signal record, payload, waitpoint stream entry and per-execution index.
  local function record_signal(k, a, now, maxlen, effect)
    local created_at = a.created_at
    if ff_empty(created_at) then created_at = now end
    redis.call('HSET', k.signal, 'signal_id', a.signal_id, 'target_execution_id', a.eid,
      'target_waitpoint_id', a.waitpoint_id, 'target_scope', a.scope, 'signal_name', a.name,
      'signal_category', a.category, 'source_type', a.source_type, 'source_identity', a.source_identity,
      'correlation_id', a.correlation_id, 'idempotency_key', a.idem, 'created_at', created_at,
      'accepted_at', now, 'matched_waitpoint_id', a.waitpoint_id, 'payload_encoding', a.encoding,
      'observed_effect', effect)
    if a.payload ~= '' then redis.call('SET', k.payload, a.payload) end
    redis.call('XADD', k.wp_signals, 'MAXLEN', '~', maxlen, '*', 'signal_id', a.signal_id,
      'signal_name', a.name, 'signal_category', a.category, 'source_type', a.source_type,
      'source_identity', a.source_identity, 'matched', '0', 'accepted_at', now)
    redis.call('ZADD', k.exec_signals, now, a.signal_id)
  end

  -- suspended -> runnable (eligible now, or delayed by `delay` ms) with its lane indexes.
  local function wake(k, a, now, delay, priority, created_at)
    local detail = 'resume delay ' .. ff_int_text(delay) .. 'ms after signal ' .. a.name
    if not k.eligible then
      local got = redis.call('HMGET', k.core, 'lane_id', 'current_lane')
      local tag, lane = ff_tag_of(k.core), ff_lane_of({lane_id = got[1], current_lane = got[2]})
      k.eligible, k.suspended = ff_key.lane(tag, lane, 'eligible'), ff_key.lane(tag, lane, 'suspended')
      k.delayed, k.lane = ff_key.lane(tag, lane, 'delayed'), lane
    end
    k.eligible_now = delay <= 0
    ff_hset(k.core, ff_wp.resume_fields(now, delay, detail))
    redis.call('ZREM', k.suspended, a.eid)
    if delay > 0 then
      redis.call('ZADD', k.delayed, now + delay, a.eid)
    else
      redis.call('ZADD', k.eligible, ff_eligible_score(priority, created_at), a.eid)
    end
  end

  -- A signal to a waitpoint of a composite suspension (its condition hash carries composite "1" and the
  -- tree, written by ff_suspend_typed): upstream v0.13's evaluation over the satisfied set
  -- (ff_wp.composite_deliver). A satisfied tree wakes the execution and closes every waitpoint of the
  -- suspension; the record keeps closer_signal_id and all_satisfier_signals, the satisfied set is dropped.
  -- A signal that earns nothing answers no_op (upstream: signal_ignored_* / appended_to_waitpoint_duplicate).
  local function deliver_composite(k, a, args, c)
    local ok, tree = pcall(cjson.decode, c.tree_json or '')
    if not ok or type(tree) ~= 'table' then return ff_err('corruption', 'tree_json') end
    local delay = 0
    if a.resume_delay ~= nil then
      delay = tonumber(a.resume_delay)
      if not delay then error('resume_delay_ms must be a number') end
      delay = math.floor(delay)
    end
    local dup = admit(k.exec_signals, k.idem, a, c.max_signals)
    if dup then return dup end
    local now, set_key = c.now, k.susp .. ':satisfied_set'
    local effect, resume = ff_wp.composite_deliver(tree, set_key, a.waitpoint_id, c.key, {
      id = a.signal_id, name = a.name, source_type = a.source_type, source_identity = a.source_identity})
    record_signal(k, a, now, c.maxlen, effect)
    local matched = effect ~= 'no_op'
    redis.call('HSET', k.wp, 'signal_count', (tonumber(c.wp[4]) or 0) + 1,
      'matched_signal_count', (tonumber(c.wp[5]) or 0) + (matched and 1 or 0), 'last_signal_at', now)
    if not resume then
      if redis.call('EXISTS', k.susp) == 1 then
        if matched then
          local order = redis.call('HGET', k.susp, 'satisfier_order')
          redis.call('HSET', k.susp, 'last_signal_at', now,
            'satisfier_order', ff_empty(order) and a.signal_id or order .. ',' .. a.signal_id)
        else
          redis.call('HSET', k.susp, 'last_signal_at', now)
        end
      end
      return ff_ok(a.signal_id, effect)
    end
    if c.phase == 'suspended' then wake(k, a, now, delay, c.priority, c.created_at) end
    local susp = redis.call('HMGET', k.susp, 'waitpoint_id', 'additional_waitpoints_json')
    local ids = {susp[1] or a.waitpoint_id}
    local dec_ok, extras = pcall(cjson.decode, susp[2] or '[]')
    if dec_ok and type(extras) == 'table' then
      for _, x in ipairs(extras) do
        if type(x) == 'table' and type(x.waitpoint_id) == 'string' then ids[#ids + 1] = x.waitpoint_id end
      end
    end
    local tag = ff_tag_of(k.core)
    for _, w in ipairs(ids) do
      local wk = ff_key.waitpoint(tag, w)
      local state = redis.call('HGET', wk, 'state')
      if state == 'active' or state == 'pending' or w == a.waitpoint_id then
        redis.call('HSET', wk, 'state', 'closed', 'satisfied_at', now, 'closed_at', now, 'close_reason', 'resumed')
      end
      if redis.call('EXISTS', ff_key.waitpoint(tag, w, 'condition')) == 1 then
        redis.call('HSET', ff_key.waitpoint(tag, w, 'condition'), 'closed', '1', 'closed_at', now,
          'closed_reason', 'satisfied')
      end
    end
    -- In arrival order (ours: satisfier_order, kept as they contributed), as the resumed attempt reads them;
    -- upstream's set has no order.
    local order = redis.call('HGET', k.susp, 'satisfier_order')
    local satisfiers = {}
    for sid in string.gmatch((order or '') .. ',' .. a.signal_id, '[^,]+') do satisfiers[#satisfiers + 1] = sid end
    redis.call('HSET', k.susp, 'satisfied_at', now, 'closed_at', now, 'close_reason', 'resumed',
      'last_signal_at', now, 'closer_signal_id', a.signal_id,
      'all_satisfier_signals', #satisfiers > 0 and cjson.encode(satisfiers) or '[]')
    redis.call('DEL', set_key, set_key .. ':signals', k.susp .. ':member_map')
    redis.call('ZREM', k.susp_timeout, a.eid)
    return ff_ok(a.signal_id, effect)
  end

  ff_deliver = function(k, args)
    local core_key, condition_key, exec_signals_key = k.core, k.condition, k.exec_signals
    local idem_key, wp_key, susp_key = k.idem, k.wp, k.susp
    local susp_timeout_key, sec_key = k.susp_timeout, k.sec
    local a = signal_args(args)

    local core = redis.call('HMGET', core_key, 'lifecycle_phase', 'priority', 'created_at')
    local phase = core[1]
    if not phase then return ff_err('execution_not_found') end
    local wp = redis.call('HMGET', wp_key, 'state', 'created_at', 'waitpoint_key', 'signal_count',
      'matched_signal_count')
    local wp_state = wp[1]
    -- Authenticate before revealing anything about the target's state.
    if ff_empty(wp[2]) then return ff_err('invalid_token') end
    local now = ff_now()
    local auth = authenticate(core_key, sec_key, a, wp[3], wp[2], now)
    if auth then return auth end

    if phase == 'terminal' then return ff_err('target_not_signalable') end
    if phase == 'active' or phase == 'runnable' or phase == 'submitted' then
      if wp_state == 'pending' then return ff_err('waitpoint_pending_use_buffer_script') end
      if wp_state ~= 'active' then return ff_err('target_not_signalable') end
    end
    local cond = ff_hgetall(condition_key)
    if next(cond) == nil then return ff_err('waitpoint_not_found') end
    if cond.closed == '1' then return ff_err('waitpoint_closed') end
    local maxlen, max_signals = stream_limits(args)
    if cond.composite == '1' then
      return deliver_composite(k, a, args, {phase = phase, priority = core[2], created_at = core[3],
        wp = wp, key = wp[3] or '', tree_json = cond.tree_json, now = now, maxlen = maxlen,
        max_signals = max_signals})
    end

    -- Evaluate the condition before writing so a bad resume delay raises with nothing written.
    local matched = ff_wp.match(cond, a.name, a.signal_id)
    local resume = matched ~= nil and ff_wp.satisfied(cond)
    local wakes = resume and phase == 'suspended'
    local delay = 0
    if wakes then
      if a.resume_delay ~= nil then
        delay = tonumber(a.resume_delay)
        if not delay then error('resume_delay_ms must be a number') end
        delay = math.floor(delay)
      end
    end

    local dup = admit(exec_signals_key, idem_key, a, max_signals)
    if dup then return dup end

    local effect = 'no_op'
    if resume then effect = 'resume_condition_satisfied' elseif matched then effect = 'appended_to_waitpoint' end
    record_signal(k, a, now, maxlen, effect)

    if wakes then wake(k, a, now, delay, core[2], core[3]) end

    if matched then
      if resume then
        redis.call('HSET', condition_key, matched .. 'satisfied', '1', matched .. 'signal_id', a.signal_id,
          'satisfied_count', cond.satisfied_count, 'closed', '1', 'closed_at', now,
          'closed_reason', 'satisfied')
      else
        redis.call('HSET', condition_key, matched .. 'satisfied', '1', matched .. 'signal_id', a.signal_id,
          'satisfied_count', cond.satisfied_count)
      end
    end

    -- Waitpoint counters (read above, so one HSET instead of HINCRBYs).
    local signal_count = (tonumber(wp[4]) or 0) + 1
    if resume then
      redis.call('HSET', wp_key, 'signal_count', signal_count,
        'matched_signal_count', (tonumber(wp[5]) or 0) + 1, 'last_signal_at', now,
        'state', 'closed', 'satisfied_at', now, 'closed_at', now, 'close_reason', 'resumed')
    elseif matched then
      redis.call('HSET', wp_key, 'signal_count', signal_count,
        'matched_signal_count', (tonumber(wp[5]) or 0) + 1, 'last_signal_at', now)
    else
      redis.call('HSET', wp_key, 'signal_count', signal_count, 'last_signal_at', now)
    end
    if redis.call('EXISTS', susp_key) == 1 then
      if resume then
        redis.call('HSET', susp_key, 'satisfied_at', now, 'closed_at', now, 'close_reason', 'resumed',
          'last_signal_at', now)
      else
        redis.call('HSET', susp_key, 'last_signal_at', now)
      end
    end
    if resume then redis.call('ZREM', susp_timeout_key, a.eid) end
    return ff_ok(a.signal_id, effect)
  end

  redis.register_function('ff_deliver_signal', function(keys, args)
    local reply = ff_deliver({core = keys[1], condition = keys[2], wp_signals = keys[3], exec_signals = keys[4],
      signal = keys[5], payload = keys[6], idem = keys[7], wp = keys[8], susp = keys[9], eligible = keys[10],
      suspended = keys[11], delayed = keys[12], susp_timeout = keys[13], sec = keys[14]}, args)
    ff_note_delivery(keys[15], args, reply)
    return reply
  end)

  redis.register_function('ff_buffer_signal_for_pending_waitpoint', function(keys, args)
    local core_key, exec_signals_key, idem_key, wp_key, sec_key = keys[1], keys[4], keys[7], keys[8], keys[9]
    local sig_keys = {wp_signals = keys[3], exec_signals = keys[4], signal = keys[5], payload = keys[6]}
    local a = signal_args(args)

    if redis.call('EXISTS', core_key) == 0 then return ff_err('execution_not_found') end
    local wp = redis.call('HMGET', wp_key, 'state', 'created_at', 'waitpoint_key')
    if ff_empty(wp[2]) then return ff_err('waitpoint_not_found') end
    local now = ff_now()
    local auth = authenticate(core_key, sec_key, a, wp[3], wp[2], now)
    if auth then return auth end
    if wp[1] == 'closed' or wp[1] == 'expired' then return ff_err('waitpoint_closed') end
    local maxlen, max_signals = stream_limits(args)

    local dup = admit(exec_signals_key, idem_key, a, max_signals)
    if dup then return dup end
    -- Condition evaluation happens when ff_suspend_execution activates the waitpoint.
    record_signal(sig_keys, a, now, maxlen, 'buffered_for_pending_waitpoint')
    return ff_ok(a.signal_id, 'buffered_for_pending_waitpoint')
  end)

  redis.register_function('ff_claim_resumed_execution', function(keys, args)
    local core_key, grant_key, eligible_key, lease_expiry_key = keys[1], keys[2], keys[3], keys[4]
    local worker_leases_key, attempt_key, lease_key, history_key = keys[5], keys[6], keys[7], keys[8]
    local active_key, attempt_timeout_key = keys[9], keys[10]
    local eid, worker_id, wiid, lane = args[1], args[2], args[3], args[4]
    local lease_id, ttl_arg, remaining_arg = args[6], args[7], args[8]

    local bad = ff_require_number(ttl_arg, 'lease_ttl_ms')
    if bad then return bad end
    local ttl = math.floor(tonumber(ttl_arg))
    local core = redis.call('HMGET', core_key, 'lifecycle_phase', 'attempt_state', 'current_lease_epoch',
      'current_attempt_id', 'current_attempt_index')
    if not core[1] then return ff_err('execution_not_found') end
    if core[1] ~= 'runnable' then return ff_err('execution_not_leaseable') end
    if core[2] ~= 'attempt_interrupted' then return ff_err('not_a_resumed_execution') end
    local grant = redis.call('HMGET', grant_key, 'worker_id', 'grant_expires_at')
    if not grant[1] or grant[1] ~= worker_id then return ff_err('invalid_claim_grant') end
    local now = ff_now()
    local grant_expires = tonumber(grant[2])
    if grant_expires and grant_expires < now then
      redis.call('DEL', grant_key)
      return ff_err('claim_grant_expired')
    end

    local remaining = tonumber(remaining_arg)
    local epoch, expires, attempt_id, attempt_index = ff_resumed_claim_writes({
      core = core_key, grant = grant_key, attempt = attempt_key, lease = lease_key, history = history_key,
      eligible = eligible_key, lease_expiry = lease_expiry_key, worker_leases = worker_leases_key,
      active = active_key, attempt_timeout = attempt_timeout_key,
    }, {current_lease_epoch = core[3], current_attempt_id = core[4], current_attempt_index = core[5]}, {
      eid = eid, worker_id = worker_id, wiid = wiid, lane = lane, lease_id = lease_id, now = now, ttl = ttl,
      remaining = remaining and remaining > 0 and remaining or nil,
    })
    return ff_ok(lease_id, ff_int_text(epoch), ff_int_text(expires), attempt_id, attempt_index, 'resumed')
  end)
end
