-- execution.lua — execution lifecycle: create, claim, complete, cancel, delay, wait for children,
-- fail (with retry policy), reclaim, expire. Contract §5.2–§5.10.
--
-- Keys touched (E: = ff:exec:<tag>:<eid>:, I: = ff:idx:<tag>:, L: = I:lane:<lane>:):
--   E:core E:payload E:policy E:tags E:result E:claim_grant E:attempts E:lease:current
--   E:lease:history E:suspension:current; A(i) = ff:attempt:<tag>:<eid>:<i> (+ :usage, :policy);
--   S(i):meta = ff:stream:<tag>:<eid>:<i>:meta; W(w), W(w):condition (cancel only);
--   ff:idem:<tag>:<ns>:<key>; I:all_executions I:execution_deadline I:attempt_timeout
--   I:lease_expiry I:suspension_timeout I:worker:<wiid>:leases; L:eligible L:delayed L:active
--   L:terminal L:suspended L:blocked:{dependencies,budget,quota,route,operator}.
--   Dynamic (tag of KEYS[1] + ids read from E:core): A(i) and A(i):usage in claim/reclaim,
--   L:* lane indexes in cancel/expire/reclaim, I:worker:<old wiid>:leases in expire/reclaim.
--
-- ff_create_execution
--   KEYS[1] E:core  [2] E:payload  [3] E:policy  [4] E:tags  [5] L:eligible or L:delayed
--   KEYS[6] idempotency key or ff:noop:<tag>  [7] I:execution_deadline  [8] I:all_executions
--   ARGV[1] execution_id  [2] namespace  [3] lane_id  [4] execution_kind  [5] priority
--   ARGV[6] creator_identity  [7] policy_json  [8] input_payload  [9] delay_until
--   ARGV[10] dedup_ttl_ms  [11] tags_json  [12] execution_deadline_at  [13] partition_id
-- ff_claim_execution
--   KEYS[1] E:core  [2] E:claim_grant  [3] L:eligible  [4] I:lease_expiry  [5] I:worker:<wiid>:leases
--   KEYS[6..8] A(i), A(i):usage, A(i):policy (placeholders; real keys built from E:core)
--   KEYS[9] E:attempts  [10] E:lease:current  [11] E:lease:history  [12] L:active
--   KEYS[13] I:attempt_timeout  [14] I:execution_deadline
--   ARGV[1] execution_id  [2] worker_id  [3] worker_instance_id  [4] lane  [5] capability hash (unused)
--   ARGV[6] lease_id  [7] lease_ttl_ms  [8] renew_before_ms  [9] attempt_id  [10] attempt_policy_json
--   ARGV[11] attempt_timeout_ms  [12] execution_deadline_at
-- ff_complete_execution
--   KEYS[1] E:core  [2] A(cur)  [3] I:lease_expiry  [4] I:worker:<wiid>:leases  [5] L:terminal
--   KEYS[6] E:lease:current  [7] E:lease:history  [8] L:active  [9] S(cur):meta  [10] E:result
--   KEYS[11] I:attempt_timeout  [12] I:execution_deadline
--   ARGV[1] execution_id  [2] lease_id  [3] lease_epoch  [4] attempt_id  [5] result_payload
-- ff_cancel_execution
--   KEYS[1] E:core  [2] A(cur)  [3] S(cur):meta  [4] E:lease:current  [5] E:lease:history
--   KEYS[6] I:lease_expiry  [7] I:worker:<wiid>:leases  [8] E:suspension:current  [9] W(w)
--   KEYS[10] W(w):condition  [11] I:suspension_timeout  [12] L:terminal  [13] I:attempt_timeout
--   KEYS[14] I:execution_deadline  [15] L:eligible  [16] L:delayed  [17] L:blocked:dependencies
--   KEYS[18] L:blocked:budget  [19] L:blocked:quota  [20] L:blocked:route  [21] L:blocked:operator
--   ARGV[1] execution_id  [2] reason  [3] source  [4] lease_id  [5] lease_epoch
-- ff_delay_execution
--   KEYS[1] E:core  [2] A(cur)  [3] E:lease:current  [4] E:lease:history  [5] I:lease_expiry
--   KEYS[6] I:worker:<wiid>:leases  [7] L:active  [8] L:delayed  [9] I:attempt_timeout
--   ARGV[1] execution_id  [2] lease_id  [3] lease_epoch  [4] attempt_id  [5] delay_until
-- ff_move_to_waiting_children
--   KEYS[1] E:core  [2] A(cur)  [3] E:lease:current  [4] E:lease:history  [5] I:lease_expiry
--   KEYS[6] I:worker:<wiid>:leases  [7] L:active  [8] L:blocked:dependencies  [9] I:attempt_timeout
--   ARGV[1] execution_id  [2] lease_id  [3] lease_epoch  [4] attempt_id
-- ff_fail_execution
--   KEYS[1] E:core  [2] A(cur)  [3] I:lease_expiry  [4] I:worker:<wiid>:leases  [5] L:terminal
--   KEYS[6] L:delayed  [7] E:lease:current  [8] E:lease:history  [9] L:active  [10] S(cur):meta
--   KEYS[11] I:attempt_timeout  [12] I:execution_deadline
--   ARGV[1] execution_id  [2] lease_id  [3] lease_epoch  [4] attempt_id  [5] failure_reason
--   ARGV[6] failure_category  [7] retry_policy_json
-- ff_reclaim_execution
--   KEYS[1] E:core  [2] E:claim_grant  [3] A(cur)  [4] S(cur):meta  [5..6] A(cur+1), :usage
--   (placeholders)  [7] E:attempts  [8] E:lease:current  [9] E:lease:history  [10] I:lease_expiry
--   KEYS[11] I:worker:<new wiid>:leases  [12] L:active  [13] I:attempt_timeout
--   KEYS[14] I:execution_deadline
--   ARGV[1] execution_id  [2] worker_id  [3] worker_instance_id  [4] lane  [5] lease_id
--   ARGV[6] lease_ttl_ms  [7] attempt_id  [8] attempt_policy_json (ignored)
--   ARGV[9] default_max_reclaim_count (upstream v0.13; absent -> 100; E:policy's max_reclaim_count wins)
-- ff_expire_execution
--   KEYS[1] E:core  [2] A(cur)  [3] S(cur):meta  [4] E:lease:current  [5] E:lease:history
--   KEYS[6] I:lease_expiry  [7] I:worker:<wiid>:leases  [8] L:active  [9] L:terminal
--   KEYS[10] I:attempt_timeout  [11] I:execution_deadline  [12] L:suspended
--   KEYS[13] I:suspension_timeout  [14] E:suspension:current
--   ARGV[1] execution_id  [2] expire_reason (absent -> attempt_timeout)

-- ff_claim_execution's writes once a fresh claim is validated (grant consumed, attempt i created,
-- lease, core, indexes, history), shared with the fast path (fastpath.lua). `k` names the keys, with
-- k.tag the hash tag A(i), A(i):usage and A(i):policy are built with; `a` the claim: eid, worker_id,
-- wiid, lane, lease_id, attempt_id, now, ttl, renew (ms), timeout_ms and deadline (or nil), policy
-- (decoded, or nil), and no_grant (the fast path read that no grant exists). `core` must hold
-- current_lease_epoch (epoch 0: no lease hash was ever written, none to clear). Returns epoch,
-- expires_at, attempt index, attempt type.
local function ff_fresh_claim_writes(k, core, a)
  local i = tonumber(core.total_attempt_count) or 0
  local epoch = (tonumber(core.current_lease_epoch) or 0) + 1
  local now = a.now
  local expires = now + a.ttl
  local renewal_deadline = now + a.renew

  -- The fast path passes no_grant when it read that no grant exists (DEL would be a no-op).
  if not a.no_grant then redis.call('DEL', k.grant) end

  local attempt_type = 'initial'
  local akey = ff_key.attempt(k.tag, a.eid, i)
  local afields = {
    'attempt_id', a.attempt_id, 'execution_id', a.eid, 'attempt_index', i,
    'attempt_state', 'started', 'created_at', now, 'started_at', now,
    'lease_id', a.lease_id, 'lease_epoch', epoch, 'worker_id', a.worker_id,
    'worker_instance_id', a.wiid,
  }
  if core.attempt_state == 'pending_retry_attempt' then
    attempt_type = 'retry'
    ff_push(afields, 'retry_reason', core.pending_retry_reason or '',
      'previous_attempt_index', core.pending_previous_attempt_index or '')
  elseif core.attempt_state == 'pending_replay_attempt' then
    attempt_type = 'replay'
    ff_push(afields, 'replay_reason', core.pending_replay_reason or '',
      'replay_requested_by', core.pending_replay_requested_by or '',
      'replayed_from_attempt_index', core.pending_previous_attempt_index or '')
  end
  ff_push(afields, 'attempt_type', attempt_type)
  redis.call('HSET', akey, unpack(afields))
  redis.call('ZADD', k.attempts, now, tostring(i))
  redis.call('HSET', ff_key.attempt(k.tag, a.eid, i, 'usage'), 'last_usage_report_seq', '0')

  if a.policy then
    -- Flatten: top-level keys become fields; nested values keep their JSON text.
    local flat = {}
    for f, v in pairs(a.policy) do
      local vt = type(v)
      if vt == 'table' or vt == 'userdata' then v = cjson.encode(v) else v = tostring(v) end
      flat[#flat + 1] = f
      flat[#flat + 1] = v
    end
    if #flat > 0 then redis.call('HSET', ff_key.attempt(k.tag, a.eid, i, 'policy'), unpack(flat)) end
  end

  -- Lease epoch 0: no lease was ever issued, so there is no stale lease hash to clear.
  if epoch > 1 then redis.call('DEL', k.lease) end
  redis.call('HSET', k.lease,
    'lease_id', a.lease_id, 'lease_epoch', epoch, 'execution_id', a.eid, 'attempt_id', a.attempt_id,
    'worker_id', a.worker_id, 'worker_instance_id', a.wiid, 'acquired_at', now,
    'expires_at', expires, 'last_renewed_at', now, 'renewal_deadline', renewal_deadline)

  local started_at = core.started_at
  if ff_empty(started_at) then started_at = now end
  local cf = {
    'lifecycle_phase', 'active', 'ownership_state', 'leased',
    'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
    'attempt_state', 'running_attempt', 'public_state', 'active',
    'current_attempt_index', i, 'total_attempt_count', i + 1,
    'current_attempt_id', a.attempt_id, 'current_lease_id', a.lease_id,
    'current_lease_epoch', epoch, 'current_worker_id', a.worker_id,
    'current_worker_instance_id', a.wiid, 'current_lane', a.lane,
    'lease_acquired_at', now, 'lease_expires_at', expires, 'lease_last_renewed_at', now,
    'lease_renewal_deadline', renewal_deadline,
    'last_transition_at', now, 'last_mutation_at', now,
  }
  -- Fields the caller read that often hold the value already: written only when they differ (the same
  -- resulting hash with fewer listpack updates; unread ones are nil here and always written).
  ff_put_changed(cf, core, 'terminal_outcome', 'none')
  ff_put_changed(cf, core, 'started_at', started_at)
  ff_put_changed(cf, core, 'pending_retry_reason', '')
  ff_put_changed(cf, core, 'pending_replay_reason', '')
  ff_put_changed(cf, core, 'pending_replay_requested_by', '')
  ff_put_changed(cf, core, 'pending_previous_attempt_index', '')
  redis.call('HSET', k.core, unpack(cf))

  redis.call('ZREM', k.eligible, a.eid)
  redis.call('ZADD', k.lease_expiry, expires, a.eid)
  redis.call('SADD', k.worker_leases, a.eid)
  redis.call('ZADD', k.active, expires, a.eid)
  if a.timeout_ms then redis.call('ZADD', k.attempt_timeout, now + a.timeout_ms, a.eid) end
  if a.deadline then redis.call('ZADD', k.deadline, a.deadline, a.eid) end

  ff_history(k.history, nil, 'acquired', {
    'lease_id', a.lease_id, 'lease_epoch', epoch, 'attempt_id', a.attempt_id,
    'attempt_index', i, 'worker_id', a.worker_id, 'ts', now,
  })
  return epoch, expires, i, attempt_type
end

-- LEASE_FIELDS: the core fields every lease-holder path needs (LV + MARK-EXPIRED + release bookkeeping).
local LEASE_FIELDS = ff_fields({
  'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state', 'terminal_outcome',
  'attempt_state', 'current_attempt_index', 'current_attempt_id', 'current_lease_id',
  'current_lease_epoch', 'current_worker_id', 'current_worker_instance_id', 'lease_expires_at',
  'flow_id', 'retry_count', 'created_at',
})

-- The lease holder's prologue of the terminal/park functions: read the core, check the fence (ARGV[2..4]
-- lease_id, lease_epoch, attempt_id, from offset `ao` of args; contract LV). Returns an error reply, or
-- nil, the core and now.
local function ff_lease_holder(core_key, history_key, args, now, ao)
  ao = ao or 0
  local core = ff_hmget(core_key, LEASE_FIELDS)
  if not core then return ff_err('execution_not_found') end
  now = now or ff_now()
  local lv = ff_validate_lease(core_key, history_key, core, args[ao + 2] or '', args[ao + 3] or '',
    args[ao + 4] or '', now)
  if lv then return lv end
  return nil, core, now
end

-- ff_complete_execution's validation and writes (KEYS[1..12], ARGV[2..5] as documented above), shared
-- with the fast-path completions (fastpath.lua), whose completion j sits at offsets `ko` of keys and
-- `ao` of args (default 0; read in place, no per-completion copies). Returns an error reply, or nil and
-- the core read, the server time and the upstream result key when the attempt was completed.
local function ff_complete_success(keys, args, now, ko, ao)
  ko, ao = ko or 0, ao or 0
  local core_key, attempt_hash, lease_expiry_key, worker_leases_key = keys[ko + 1], keys[ko + 2], keys[ko + 3], keys[ko + 4]
  local terminal_key, lease_key, history_key, active_key = keys[ko + 5], keys[ko + 6], keys[ko + 7], keys[ko + 8]
  local stream_meta, result_key, attempt_timeout_key, deadline_key = keys[ko + 9], keys[ko + 10], keys[ko + 11], keys[ko + 12]
  local lease_id, lease_epoch, result = args[ao + 2] or '', args[ao + 3] or '', args[ao + 5] or ''

  local err, core
  err, core, now = ff_lease_holder(core_key, history_key, args, now, ao)
  if err then return err end
  local eid = core.execution_id

  redis.call('HSET', attempt_hash, 'attempt_state', 'ended_success', 'ended_at', now)
  ff_close_stream_meta(stream_meta, now, 'attempt_success', false)
  if result ~= '' then redis.call('SET', result_key, result) end
  redis.call('HSET', core_key,
    'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
    'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
    'terminal_outcome', 'success', 'attempt_state', 'attempt_terminal',
    'public_state', 'completed', 'completed_at', now,
    'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
    'lease_expires_at', '', 'lease_last_renewed_at', '', 'lease_renewal_deadline', '',
    'lease_expired_at', '', 'lease_revoked_at', '', 'lease_revoke_reason', '',
    'last_transition_at', now, 'last_mutation_at', now)
  redis.call('ZREM', lease_expiry_key, eid)
  redis.call('SREM', worker_leases_key, eid)
  redis.call('ZADD', terminal_key, now, eid)
  redis.call('ZREM', active_key, eid)
  redis.call('ZREM', attempt_timeout_key, eid)
  redis.call('ZREM', deadline_key, eid)
  redis.call('DEL', lease_key)
  ff_history(history_key, nil, 'released', {
    'lease_id', lease_id, 'lease_epoch', lease_epoch,
    'attempt_index', core.current_attempt_index or '', 'reason', 'completed', 'ts', now,
  })
  ff_publish_completion(core, 'success')
  return nil, core, now, result_key
end

-- The contract's create (ff_create_execution), shared with our ff_create_fast (fastpath.lua):
-- ff_create(keys, args, write_core) where write_core(core_key, pairs) writes the new core hash's
-- fields `pairs` (the contract: one HSET). Assigned inside the block below.
local ff_create

-- The core fields a create writes, in the contract's order ({field, value, ...}).
local function ff_create_core_pairs(c)
  return {
    'execution_id', c.eid, 'namespace', c.namespace, 'lane_id', c.lane_id,
    'execution_kind', c.kind, 'partition_id', c.partition_id, 'priority', c.priority,
    'creator_identity', c.creator,
    'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
    'eligibility_state', c.eligibility, 'blocking_reason', c.blocking, 'blocking_detail', c.detail,
    'terminal_outcome', 'none', 'attempt_state', 'pending_first_attempt', 'public_state', c.public,
    'total_attempt_count', '0', 'current_attempt_index', '', 'current_attempt_id', '',
    'current_lease_id', '', 'current_lease_epoch', '0', 'current_worker_id', '',
    'current_worker_instance_id', '', 'current_lane', c.lane_id,
    'retry_count', '0', 'replay_count', '0', 'lease_reclaim_count', '0',
    'created_at', c.now, 'started_at', '', 'completed_at', '',
    'last_transition_at', c.now, 'last_mutation_at', c.now,
    'lease_acquired_at', '', 'lease_expires_at', '', 'lease_last_renewed_at', '',
    'lease_renewal_deadline', '', 'lease_expired_at', '', 'lease_revoked_at', '',
    'lease_revoke_reason', '', 'delay_until', c.delay_until,
    'current_suspension_id', '', 'current_waitpoint_id', '',
    'pending_retry_reason', '', 'pending_replay_reason', '', 'pending_replay_requested_by', '',
    'pending_previous_attempt_index', '',
    'progress_pct', '', 'progress_message', '', 'progress_updated_at', '',
    'flow_id', '',
  }
end

do
  local function arg_or_empty(v)
    if v == nil then return '' end
    return v
  end

  -- A numeric JSON field as Lua arithmetic would see it: nil/false -> default, numbers and
  -- numeric strings coerce, anything else (JSON null, objects, ...) raises like upstream does.
  local function json_num(v, default, name)
    if v == nil or v == false then return default end
    local n = tonumber(v)
    if n == nil then error('retry policy field ' .. name .. ' is not a number') end
    return n
  end

  -- Retry decision of contract §7.2. Returns the whole-ms backoff, or nil for no retry.
  -- Raises (before any write) on a null/non-numeric max_retries or a non-object backoff,
  -- which is where upstream raises too (§10 row 7); backoff is rounded to whole ms (§10 row 8).
  local function retry_backoff(policy_json, retry_count)
    local policy = ff_json(policy_json)
    if type(policy) ~= 'table' then return nil end
    local max_retries = policy.max_retries or 0
    if type(max_retries) ~= 'number' then
      error('retry policy max_retries must be a number')
    end
    if not (retry_count < max_retries) then return nil end
    local backoff = policy.backoff or {}
    local bt = type(backoff)
    if bt == 'string' then
      backoff = {} -- indexing a string yields nil fields in Lua
    elseif bt ~= 'table' then
      error('retry policy backoff must be an object')
    end
    local delay
    if backoff.type == 'exponential' then
      local initial = json_num(backoff.initial_delay_ms, 1000, 'initial_delay_ms')
      local mult = json_num(backoff.multiplier, 2, 'multiplier')
      local cap = json_num(backoff.max_delay_ms, 60000, 'max_delay_ms')
      delay = math.min(initial * mult ^ retry_count, cap)
    elseif backoff.type == 'fixed' then
      delay = json_num(backoff.delay_ms, 1000, 'delay_ms')
    else
      delay = 1000
    end
    return math.floor(delay + 0.5)
  end

  -- Validates create's policy JSON (§5.2 check 4, §10 row 11: JSON null counts as absent).
  -- Returns (error_reply, nil) or (nil, sorted capability CSV or nil).
  local function check_policy(policy_json)
    if policy_json == '' or policy_json == '{}' then return nil, nil end
    local ok, policy = pcall(cjson.decode, policy_json)
    if not ok then return ff_err('invalid_policy_json', 'malformed'), nil end
    local pt = type(policy)
    if pt == 'string' then return nil, nil end
    if pt ~= 'table' then error('policy_json must be a JSON object') end
    local rr = policy.routing_requirements
    if rr == nil or rr == cjson.null then return nil, nil end
    if type(rr) ~= 'table' then
      return ff_err('invalid_policy_json', 'routing_requirements:not_object'), nil
    end
    local req = rr.required_capabilities
    if req == nil or req == cjson.null then return nil, nil end
    if type(req) ~= 'table' then
      return ff_err('invalid_capabilities', 'required:not_array'), nil
    end
    local caps = {}
    for i = 1, #req do
      local tok = req[i]
      if type(tok) ~= 'string' then
        return ff_err('invalid_capabilities', 'required:non_string_token'), nil
      end
      if tok == '' then
        return ff_err('invalid_capabilities', 'required:empty_token'), nil
      end
      if string.find(tok, ',', 1, true) then
        return ff_err('invalid_capabilities', 'required:comma_in_token'), nil
      end
      if string.find(tok, '[%z\1-\32\127]') then
        return ff_err('invalid_capabilities', 'required:control_or_whitespace'), nil
      end
      caps[#caps + 1] = tok
    end
    if #caps > 256 then
      return ff_err('invalid_capabilities', 'required:too_many_tokens'), nil
    end
    if #caps == 0 then return nil, nil end
    table.sort(caps)
    local csv = table.concat(caps, ',')
    if #csv > 4096 then
      return ff_err('invalid_capabilities', 'required:too_many_bytes'), nil
    end
    return nil, csv
  end

  ---------------------------------------------------------------------------------------------
  ff_create = function(keys, args, write_core)
    local core_key, payload_key, policy_key, tags_key = keys[1], keys[2], keys[3], keys[4]
    local sched_key, idem_key, deadline_key, all_key = keys[5], keys[6], keys[7], keys[8]
    local eid = args[1]
    local namespace = arg_or_empty(args[2])
    local lane_id = arg_or_empty(args[3])
    local kind = arg_or_empty(args[4])
    local priority_raw = args[5]
    local creator = arg_or_empty(args[6])
    local policy_json = arg_or_empty(args[7])
    local payload = arg_or_empty(args[8])
    local delay_raw = arg_or_empty(args[9])
    local dedup_raw = arg_or_empty(args[10])
    local tags_json = arg_or_empty(args[11])
    local deadline_raw = arg_or_empty(args[12])
    local partition_id = arg_or_empty(args[13])

    local bad = ff_require_number(priority_raw, 'priority')
    if bad then return bad end

    local real_idem = not ff_empty(idem_key) and not ff_key.is_noop(idem_key)
    if real_idem then
      local prior = redis.call('GET', idem_key)
      if prior then return {1, 'DUPLICATE', prior} end
    end
    if redis.call('EXISTS', core_key) == 1 then return {1, 'DUPLICATE', eid} end

    local perr, caps_csv = check_policy(policy_json)
    if perr then return perr end

    -- Upstream raises on these mid-write; we raise before the first write instead.
    local priority = ff_clamp_priority(tonumber(priority_raw))
    local delay_num = nil
    if delay_raw ~= '' then
      delay_num = tonumber(delay_raw)
      if delay_num == nil then error('delay_until must be a number, got: ' .. delay_raw) end
    end
    if deadline_raw ~= '' and tonumber(deadline_raw) == nil then
      error('execution_deadline_at must be a number, got: ' .. deadline_raw)
    end

    local now = ff_now()
    local delayed = delay_num ~= nil and delay_num > now
    local eligibility, blocking, detail, public, delay_until
    if delayed then
      eligibility, blocking = 'not_eligible_until_time', 'waiting_for_delay'
      detail, public, delay_until = 'delayed until ' .. delay_raw, 'delayed', delay_raw
    else
      eligibility, blocking, detail, public, delay_until =
        'eligible_now', 'waiting_for_worker', '', 'waiting', ''
    end

    write_core(core_key, ff_create_core_pairs({
      eid = eid, namespace = namespace, lane_id = lane_id, kind = kind, partition_id = partition_id,
      priority = priority, creator = creator, eligibility = eligibility, blocking = blocking,
      detail = detail, public = public, now = now, delay_until = delay_until,
    }))
    if caps_csv then redis.call('HSET', core_key, 'required_capabilities', caps_csv) end

    if payload ~= '' then redis.call('SET', payload_key, payload) end
    if policy_json ~= '' then redis.call('SET', policy_key, policy_json) end

    -- Tags: a JSON object of string values; anything undecodable is silently ignored.
    if tags_json ~= '' and tags_json ~= '{}' then
      local tags = ff_json(tags_json)
      if type(tags) == 'table' then
        local flat = {}
        for k, v in pairs(tags) do
          local vt = type(v)
          if vt == 'string' or vt == 'number' then
            flat[#flat + 1] = k
            flat[#flat + 1] = v
          end
        end
        if #flat > 0 then redis.call('HSET', tags_key, unpack(flat)) end
      end
    end

    -- Upstream quirk (§5.2): KEYS[5] gets the eid even if the caller chose L:delayed for a
    -- delay that has already passed; the score is then the composite eligible score.
    if delayed then
      redis.call('ZADD', sched_key, delay_num, eid)
    else
      redis.call('ZADD', sched_key, ff_eligible_score(priority, now), eid)
    end
    redis.call('SADD', all_key, eid)
    if deadline_raw ~= '' then redis.call('ZADD', deadline_key, deadline_raw, eid) end

    local ttl = tonumber(dedup_raw)
    if real_idem and ttl and ttl >= 1 then
      redis.call('SET', idem_key, eid, 'PX', math.floor(ttl))
    end

    return {1, 'OK', eid, public}
  end

  local function hset_core(core_key, pairs)
    redis.call('HSET', core_key, unpack(pairs))
  end

  redis.register_function('ff_create_execution', function(keys, args)
    return ff_create(keys, args, hset_core)
  end)

  ---------------------------------------------------------------------------------------------
  local CLAIM_FIELDS = {
    'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state', 'terminal_outcome',
    'attempt_state', 'total_attempt_count', 'current_lease_epoch', 'started_at',
    'pending_retry_reason', 'pending_replay_reason', 'pending_replay_requested_by',
    'pending_previous_attempt_index',
  }

  redis.register_function('ff_claim_execution', function(keys, args)
    local core_key, grant_key, eligible_key, lease_expiry_key = keys[1], keys[2], keys[3], keys[4]
    local worker_leases_key, attempts_key, lease_key, history_key = keys[5], keys[9], keys[10], keys[11]
    local active_key, attempt_timeout_key, deadline_key = keys[12], keys[13], keys[14]
    local worker_id = arg_or_empty(args[2])
    local wiid = arg_or_empty(args[3])
    local lane = arg_or_empty(args[4])
    local lease_id = arg_or_empty(args[6])
    local ttl_raw, renew_raw = args[7], args[8]
    local attempt_id = arg_or_empty(args[9])
    local policy_json = arg_or_empty(args[10])
    local timeout_raw = arg_or_empty(args[11])
    local deadline_raw = arg_or_empty(args[12])

    local bad = ff_require_number(ttl_raw, 'lease_ttl_ms')
      or ff_require_number(renew_raw, 'renew_before_ms')
    if bad then return bad end

    local core = ff_hmget(core_key, CLAIM_FIELDS)
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'runnable' then return ff_err('execution_not_leaseable') end
    if core.ownership_state ~= 'unowned' then return ff_err('lease_conflict') end
    if core.eligibility_state ~= 'eligible_now' then return ff_err('execution_not_leaseable') end
    if core.terminal_outcome ~= 'none' then return ff_err('execution_not_leaseable') end
    if core.attempt_state == 'running_attempt' then return ff_err('active_attempt_exists') end
    if core.attempt_state == 'attempt_interrupted' then
      return ff_err('use_claim_resumed_execution')
    end

    local grant = redis.call('HMGET', grant_key, 'worker_id', 'grant_expires_at')
    if not grant[1] or grant[1] ~= worker_id then return ff_err('invalid_claim_grant') end
    local now = ff_now()
    if not ff_empty(grant[2]) and tonumber(grant[2]) and tonumber(grant[2]) < now then
      return ff_err('claim_grant_expired')
    end

    -- Upstream raises on these after consuming the grant (§10 row 6): raise before writing.
    local policy = nil
    if policy_json ~= '' then
      local ok, decoded = pcall(cjson.decode, policy_json)
      if not ok or type(decoded) ~= 'table' then
        error('attempt_policy_json must be a JSON object')
      end
      policy = decoded
    end
    local timeout_ms = nil
    if timeout_raw ~= '' and timeout_raw ~= '0' then
      timeout_ms = tonumber(timeout_raw)
      if timeout_ms == nil then error('attempt_timeout_ms must be a number, got: ' .. timeout_raw) end
    end
    local has_deadline = deadline_raw ~= '' and deadline_raw ~= '0'
    if has_deadline and tonumber(deadline_raw) == nil then
      error('execution_deadline_at must be a number, got: ' .. deadline_raw)
    end

    local eid = core.execution_id or args[1]
    local epoch, expires, i, attempt_type = ff_fresh_claim_writes({
      core = core_key, grant = grant_key, eligible = eligible_key, lease_expiry = lease_expiry_key,
      worker_leases = worker_leases_key, attempts = attempts_key, lease = lease_key, history = history_key,
      active = active_key, attempt_timeout = attempt_timeout_key, deadline = deadline_key,
      tag = ff_tag_of(core_key),
    }, core, {
      eid = eid, worker_id = worker_id, wiid = wiid, lane = lane, lease_id = lease_id, attempt_id = attempt_id,
      now = now, ttl = tonumber(ttl_raw), renew = tonumber(renew_raw), timeout_ms = timeout_ms,
      deadline = has_deadline and deadline_raw or nil, policy = policy,
    })

    return {1, 'OK', lease_id, tostring(epoch), tostring(expires), attempt_id, tostring(i),
      attempt_type}
  end)

  ---------------------------------------------------------------------------------------------
  redis.register_function('ff_complete_execution', function(keys, args)
    local err = ff_complete_success(keys, args)
    if err then return err end
    return {1, 'OK', 'completed'}
  end)

  ---------------------------------------------------------------------------------------------
  local CANCEL_FIELDS = {
    'execution_id', 'lifecycle_phase', 'ownership_state', 'terminal_outcome', 'attempt_state',
    'current_attempt_index', 'current_lease_id', 'current_lease_epoch', 'lane_id', 'flow_id',
  }

  redis.register_function('ff_cancel_execution', function(keys, args)
    local core_key, attempt_hash, stream_meta, lease_key, history_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local lease_expiry_key, worker_leases_key, susp_key, wp_key, wp_cond_key =
      keys[6], keys[7], keys[8], keys[9], keys[10]
    local susp_timeout_key, terminal_key, attempt_timeout_key, deadline_key =
      keys[11], keys[12], keys[13], keys[14]
    local eid = args[1]
    local reason = arg_or_empty(args[2])
    local source = arg_or_empty(args[3])
    local lease_id = arg_or_empty(args[4])
    local lease_epoch = arg_or_empty(args[5])

    local core = ff_hmget(core_key, CANCEL_FIELDS)
    if not core then return ff_err('execution_not_found') end
    local phase = core.lifecycle_phase
    if phase == 'terminal' then
      return {0, 'execution_not_active', core.terminal_outcome or '', core.current_lease_epoch or ''}
    end
    if phase == 'active' and source ~= 'operator_override' then
      if core.ownership_state == 'lease_revoked' then return ff_err('lease_revoked') end
      if lease_id ~= '' and (core.current_lease_id ~= lease_id
          or tostring(core.current_lease_epoch) ~= lease_epoch) then
        return ff_err('stale_lease')
      end
    end

    local now = ff_now()
    local has_attempt = not ff_empty(core.current_attempt_index)
    if phase == 'active' or phase == 'suspended' then
      if has_attempt then
        redis.call('HSET', attempt_hash, 'attempt_state', 'ended_cancelled', 'ended_at', now,
          'failure_reason', 'cancelled: ' .. reason)
      end
      ff_close_stream_meta(stream_meta, now, 'attempt_cancelled', false)
    end
    if phase == 'active' then
      redis.call('DEL', lease_key)
      ff_history(history_key, nil, 'released', {
        'lease_id', core.current_lease_id or '', 'lease_epoch', core.current_lease_epoch or '',
        'attempt_index', core.current_attempt_index or '', 'reason', 'cancelled', 'ts', now,
      })
    elseif phase == 'suspended' then
      -- One at a time: some callers pass E:suspension:current for KEYS[9]/[10] (§9.1).
      if redis.call('EXISTS', susp_key) == 1 then
        redis.call('HSET', susp_key, 'closed_at', now, 'close_reason', 'cancelled')
      end
      if redis.call('EXISTS', wp_key) == 1 then
        redis.call('HSET', wp_key, 'state', 'closed', 'closed_at', now, 'close_reason', 'cancelled')
      end
      if redis.call('EXISTS', wp_cond_key) == 1 then
        redis.call('HSET', wp_cond_key, 'closed', '1', 'closed_at', now, 'closed_reason', 'cancelled')
      end
    end

    local attempt_state = 'attempt_terminal'
    if not has_attempt then
      attempt_state = core.attempt_state
      if ff_empty(attempt_state) then attempt_state = 'none' end
    end
    local cancelled_by = source
    if cancelled_by == '' then cancelled_by = eid end
    redis.call('HSET', core_key,
      'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
      'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
      'terminal_outcome', 'cancelled', 'attempt_state', attempt_state,
      'public_state', 'cancelled', 'cancellation_reason', reason, 'cancelled_by', cancelled_by,
      'completed_at', now,
      'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
      'lease_expires_at', '', 'lease_last_renewed_at', '', 'lease_renewal_deadline', '',
      'current_suspension_id', '', 'current_waitpoint_id', '',
      'last_transition_at', now, 'last_mutation_at', now)

    for k = 15, 21 do redis.call('ZREM', keys[k], eid) end
    redis.call('ZREM', lease_expiry_key, eid)
    redis.call('ZREM', susp_timeout_key, eid)
    redis.call('ZREM', attempt_timeout_key, eid)
    redis.call('ZREM', deadline_key, eid)
    -- Lane indexes not in KEYS: lane_id, else "default" (no current_lane fallback, §10 row 9).
    local lane = core.lane_id
    if ff_empty(lane) then lane = 'default' end
    local tag = ff_tag_of(core_key)
    redis.call('ZREM', ff_key.lane(tag, lane, 'active'), eid)
    redis.call('ZREM', ff_key.lane(tag, lane, 'suspended'), eid)
    redis.call('SREM', worker_leases_key, eid)
    redis.call('ZADD', terminal_key, now, eid)

    if source ~= 'flow_cascade' then ff_publish_completion(core, 'cancelled') end
    return {1, 'OK', 'cancelled', phase or ''}
  end)

  ---------------------------------------------------------------------------------------------
  -- Shared tail of delay / move_to_waiting_children: the worker gives the lease back but the
  -- attempt continues later (attempt_interrupted; resumed via ff_claim_resumed_execution).
  local function park_attempt(keys, core, now, reason, core_fields)
    local eid = core.execution_id
    redis.call('HSET', keys[1], unpack(core_fields))
    redis.call('HSET', keys[2], 'attempt_state', 'suspended', 'suspended_at', now,
      'suspension_id', reason)
    redis.call('DEL', keys[3])
    redis.call('ZREM', keys[5], eid)
    redis.call('SREM', keys[6], eid)
    redis.call('ZREM', keys[7], eid)
    redis.call('ZREM', keys[9], eid)
    ff_history(keys[4], nil, 'released', {
      'lease_id', core.current_lease_id or '', 'lease_epoch', core.current_lease_epoch or '',
      'attempt_index', core.current_attempt_index or '', 'attempt_id', core.current_attempt_id or '',
      'reason', reason, 'ts', now,
    })
  end

  redis.register_function('ff_delay_execution', function(keys, args)
    local core_key, history_key, delayed_key = keys[1], keys[4], keys[8]
    local delay_until = arg_or_empty(args[5])

    local err, core, now = ff_lease_holder(core_key, history_key, args)
    if err then return err end
    -- Upstream raises on a non-numeric delay only after writing; raise before instead.
    if tonumber(delay_until) == nil then
      error('delay_until must be a number, got: ' .. delay_until)
    end

    park_attempt(keys, core, now, 'worker_delay', {
      'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
      'eligibility_state', 'not_eligible_until_time', 'blocking_reason', 'waiting_for_delay',
      'blocking_detail', 'delayed until ' .. delay_until, 'terminal_outcome', 'none',
      'attempt_state', 'attempt_interrupted', 'public_state', 'delayed',
      'delay_until', delay_until,
      'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
      'lease_expires_at', '', 'lease_last_renewed_at', '', 'lease_renewal_deadline', '',
      'last_transition_at', now, 'last_mutation_at', now,
    })
    redis.call('ZADD', delayed_key, delay_until, core.execution_id)
    return {1, 'OK', delay_until}
  end)

  redis.register_function('ff_move_to_waiting_children', function(keys, args)
    local core_key, history_key, blocked_key = keys[1], keys[4], keys[8]

    local err, core, now = ff_lease_holder(core_key, history_key, args)
    if err then return err end

    park_attempt(keys, core, now, 'waiting_children', {
      'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
      'eligibility_state', 'blocked_by_dependencies', 'blocking_reason', 'waiting_for_children',
      'blocking_detail', 'waiting for child executions to complete', 'terminal_outcome', 'none',
      'attempt_state', 'attempt_interrupted', 'public_state', 'waiting_children',
      'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
      'lease_expires_at', '', 'lease_last_renewed_at', '', 'lease_renewal_deadline', '',
      'last_transition_at', now, 'last_mutation_at', now,
    })
    redis.call('ZADD', blocked_key, tonumber(core.created_at) or 0, core.execution_id)
    return {1, 'OK'}
  end)

  ---------------------------------------------------------------------------------------------
  redis.register_function('ff_fail_execution', function(keys, args)
    local core_key, attempt_hash, lease_expiry_key, worker_leases_key = keys[1], keys[2], keys[3], keys[4]
    local terminal_key, delayed_key, lease_key, history_key = keys[5], keys[6], keys[7], keys[8]
    local active_key, stream_meta, attempt_timeout_key, deadline_key = keys[9], keys[10], keys[11], keys[12]
    local lease_id = arg_or_empty(args[2])
    local lease_epoch = arg_or_empty(args[3])
    local reason = arg_or_empty(args[5])
    local category = arg_or_empty(args[6])
    local policy_json = arg_or_empty(args[7])

    local err, core, now = ff_lease_holder(core_key, history_key, args)
    if err then return err end

    -- Decide (and possibly raise) before the first write.
    local retry_count = tonumber(core.retry_count) or 0
    local backoff = retry_backoff(policy_json, retry_count)
    local eid = core.execution_id
    local attempt_index = core.current_attempt_index or ''

    redis.call('HSET', attempt_hash, 'attempt_state', 'ended_failure', 'ended_at', now,
      'failure_reason', reason, 'failure_category', category)
    ff_close_stream_meta(stream_meta, now, 'attempt_failure', false)
    redis.call('DEL', lease_key)
    redis.call('ZREM', lease_expiry_key, eid)
    redis.call('SREM', worker_leases_key, eid)
    redis.call('ZREM', active_key, eid)
    redis.call('ZREM', attempt_timeout_key, eid)

    if backoff then
      local delay_until = now + backoff
      local prev = attempt_index
      if prev == '' then prev = '0' end
      redis.call('HSET', core_key,
        'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
        'eligibility_state', 'not_eligible_until_time', 'blocking_reason', 'waiting_for_retry_backoff',
        'blocking_detail', 'retry backoff until ' .. tostring(delay_until) .. ' (attempt '
          .. attempt_index .. ' failed: ' .. reason .. ')',
        'terminal_outcome', 'none', 'attempt_state', 'pending_retry_attempt',
        'public_state', 'delayed', 'pending_retry_reason', reason,
        'pending_previous_attempt_index', prev, 'retry_count', retry_count + 1,
        'current_attempt_id', '', 'current_lease_id', '', 'current_worker_id', '',
        'current_worker_instance_id', '', 'lease_expires_at', '', 'lease_last_renewed_at', '',
        'lease_renewal_deadline', '', 'delay_until', delay_until, 'failure_reason', reason,
        'last_transition_at', now, 'last_mutation_at', now)
      redis.call('ZADD', delayed_key, delay_until, eid)
      ff_history(history_key, nil, 'released', {
        'lease_id', lease_id, 'lease_epoch', lease_epoch, 'attempt_index', attempt_index,
        'reason', 'failed_retry_scheduled', 'ts', now,
      })
      return {1, 'OK', 'retry_scheduled', tostring(delay_until)}
    end

    redis.call('HSET', core_key,
      'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
      'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
      'terminal_outcome', 'failed', 'attempt_state', 'attempt_terminal', 'public_state', 'failed',
      'failure_reason', reason, 'completed_at', now,
      'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
      'lease_expires_at', '', 'lease_last_renewed_at', '', 'lease_renewal_deadline', '',
      'last_transition_at', now, 'last_mutation_at', now)
    redis.call('ZREM', deadline_key, eid)
    redis.call('ZADD', terminal_key, now, eid)
    ff_history(history_key, nil, 'released', {
      'lease_id', lease_id, 'lease_epoch', lease_epoch, 'attempt_index', attempt_index,
      'reason', 'failed_terminal', 'ts', now,
    })
    ff_publish_completion(core, 'failed')
    return {1, 'OK', 'terminal_failed'}
  end)

  ---------------------------------------------------------------------------------------------
  local RECLAIM_FIELDS = {
    'execution_id', 'lifecycle_phase', 'ownership_state', 'current_attempt_index',
    'total_attempt_count', 'current_lease_epoch', 'current_worker_instance_id',
    'lease_reclaim_count', 'lane_id', 'current_lane',
  }

  -- max_reclaim_count from E:policy, else `default` (ARGV 9, upstream v0.13's caller default; absent -> 100).
  -- A null or non-numeric value raises, as the upstream comparison does (§10 row 7) — here before anything
  -- is written.
  local function max_reclaims(core_key, default)
    local text = redis.call('GET', ff_key.of_core(core_key, 'policy'))
    if not text then return default end
    local policy = ff_json(text)
    if type(policy) ~= 'table' then return default end
    local max = policy.max_reclaim_count or default
    if type(max) ~= 'number' then error('max_reclaim_count must be a number') end
    return max
  end

  redis.register_function('ff_reclaim_execution', function(keys, args)
    local core_key, grant_key, old_attempt_hash, old_stream_meta = keys[1], keys[2], keys[3], keys[4]
    local attempts_key, lease_key, history_key, lease_expiry_key = keys[7], keys[8], keys[9], keys[10]
    local worker_leases_key, active_key, attempt_timeout_key, deadline_key =
      keys[11], keys[12], keys[13], keys[14]
    local worker_id = arg_or_empty(args[2])
    local wiid = arg_or_empty(args[3])
    local lane = arg_or_empty(args[4])
    local lease_id = arg_or_empty(args[5])
    local ttl_raw = args[6]
    local attempt_id = arg_or_empty(args[7])

    local bad = ff_require_number(ttl_raw, 'lease_ttl_ms')
    if bad then return bad end
    local default_max = 100
    if args[9] ~= nil then
      default_max = tonumber(args[9])
      if not default_max then error('default_max_reclaim_count must be a number') end
    end
    local core = ff_hmget(core_key, RECLAIM_FIELDS)
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'active' then return ff_err('execution_not_reclaimable') end
    local ownership = core.ownership_state
    if ownership ~= 'lease_expired_reclaimable' and ownership ~= 'lease_revoked' then
      return ff_err('execution_not_reclaimable')
    end

    local eid = core.execution_id
    local reclaims = tonumber(core.lease_reclaim_count) or 0
    local now
    if reclaims >= max_reclaims(core_key, default_max) then
      -- Cap reached: fail terminally, then report it as an error (error with side effects).
      now = ff_now()
      redis.call('HSET', core_key,
        'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
        'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
        'terminal_outcome', 'failed', 'attempt_state', 'attempt_terminal', 'public_state', 'failed',
        'failure_reason', 'max_reclaims_exceeded', 'completed_at', now,
        'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
        'last_transition_at', now, 'last_mutation_at', now)
      local tag = ff_tag_of(core_key)
      redis.call('DEL', lease_key)
      redis.call('ZREM', lease_expiry_key, eid)
      redis.call('SREM', worker_leases_key, eid)
      redis.call('SREM', ff_key.worker_leases(tag, core.current_worker_instance_id or ''), eid)
      redis.call('ZREM', active_key, eid)
      redis.call('ZREM', attempt_timeout_key, eid)
      redis.call('ZREM', deadline_key, eid)
      redis.call('ZADD', ff_key.lane(tag, ff_lane_of(core), 'terminal'), now, eid)
      return ff_err('max_retries_exhausted')
    end

    local grant_worker = redis.call('HGET', grant_key, 'worker_id')
    if not grant_worker or grant_worker ~= worker_id then return ff_err('invalid_claim_grant') end

    now = ff_now()
    local old = core.current_attempt_index
    if ff_empty(old) then old = '0' end
    local i = tonumber(core.total_attempt_count) or 0
    local old_epoch = core.current_lease_epoch or ''
    local epoch = (tonumber(old_epoch) or 0) + 1
    local ttl = tonumber(ttl_raw)
    local expires = now + ttl
    local renewal_deadline = now + math.floor(ttl * 2 / 3)
    local reason = 'lease_' .. ownership

    redis.call('DEL', grant_key)
    redis.call('HSET', old_attempt_hash, 'attempt_state', 'interrupted_reclaimed', 'ended_at', now,
      'failure_reason', reason)
    ff_close_stream_meta(old_stream_meta, now, 'reclaimed', false)

    local tag = ff_tag_of(core_key)
    local akey = ff_key.attempt(tag, eid, i)
    redis.call('HSET', akey,
      'attempt_id', attempt_id, 'execution_id', eid, 'attempt_index', i,
      'attempt_type', 'reclaim', 'attempt_state', 'started', 'created_at', now, 'started_at', now,
      'lease_id', lease_id, 'lease_epoch', epoch, 'worker_id', worker_id,
      'worker_instance_id', wiid, 'reclaim_reason', reason, 'previous_attempt_index', old)
    redis.call('ZADD', attempts_key, now, tostring(i))
    redis.call('HSET', ff_key.attempt(tag, eid, i, 'usage'), 'last_usage_report_seq', '0')

    redis.call('DEL', lease_key)
    redis.call('HSET', lease_key,
      'lease_id', lease_id, 'lease_epoch', epoch, 'execution_id', eid, 'attempt_id', attempt_id,
      'worker_id', worker_id, 'worker_instance_id', wiid, 'acquired_at', now,
      'expires_at', expires, 'last_renewed_at', now, 'renewal_deadline', renewal_deadline)

    redis.call('HSET', core_key,
      'lifecycle_phase', 'active', 'ownership_state', 'leased',
      'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
      'terminal_outcome', 'none', 'attempt_state', 'running_attempt', 'public_state', 'active',
      'current_attempt_index', i, 'total_attempt_count', i + 1,
      'current_attempt_id', attempt_id, 'current_lease_id', lease_id,
      'current_lease_epoch', epoch, 'current_worker_id', worker_id,
      'current_worker_instance_id', wiid, 'current_lane', lane,
      'lease_acquired_at', now, 'lease_expires_at', expires, 'lease_last_renewed_at', now,
      'lease_renewal_deadline', renewal_deadline,
      'lease_expired_at', '', 'lease_revoked_at', '', 'lease_revoke_reason', '',
      'lease_reclaim_count', reclaims + 1,
      'last_transition_at', now, 'last_mutation_at', now)

    redis.call('ZADD', lease_expiry_key, expires, eid)
    redis.call('SADD', worker_leases_key, eid)
    redis.call('ZADD', active_key, expires, eid)
    ff_history(history_key, nil, 'reclaimed', {
      'old_lease_epoch', old_epoch, 'new_lease_id', lease_id, 'new_lease_epoch', epoch,
      'new_attempt_id', attempt_id, 'new_attempt_index', i, 'worker_id', worker_id, 'ts', now,
    })

    return {1, 'OK', lease_id, tostring(epoch), tostring(expires), attempt_id, tostring(i), 'reclaim'}
  end)

  ---------------------------------------------------------------------------------------------
  local EXPIRE_FIELDS = {
    'execution_id', 'lifecycle_phase', 'eligibility_state', 'attempt_state',
    'current_attempt_index', 'current_lease_id', 'current_lease_epoch',
    'current_worker_instance_id', 'lane_id', 'current_lane',
  }

  -- Runnable eligibility_state -> the lane index it lives in (anything else: all of them).
  local RUNNABLE_INDEX = {
    eligible_now = 'eligible',
    not_eligible_until_time = 'delayed',
    blocked_by_dependencies = 'blocked:dependencies',
    blocked_by_budget = 'blocked:budget',
    blocked_by_quota = 'blocked:quota',
    blocked_by_route = 'blocked:route',
    blocked_by_operator = 'blocked:operator',
  }
  local RUNNABLE_ALL = {
    'eligible', 'delayed', 'blocked:dependencies', 'blocked:budget', 'blocked:quota',
    'blocked:route', 'blocked:operator',
  }

  redis.register_function('ff_expire_execution', function(keys, args)
    local core_key, attempt_hash, stream_meta, lease_key, history_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local lease_expiry_key, worker_leases_key, active_key, terminal_key = keys[6], keys[7], keys[8], keys[9]
    local attempt_timeout_key, deadline_key, suspended_key = keys[10], keys[11], keys[12]
    local susp_timeout_key, susp_key = keys[13], keys[14]
    local eid = args[1]
    local reason = args[2]
    if reason == nil then reason = 'attempt_timeout' end

    local core = ff_hmget(core_key, EXPIRE_FIELDS)
    if not core then
      redis.call('ZREM', attempt_timeout_key, eid)
      redis.call('ZREM', deadline_key, eid)
      return {1, 'OK', 'not_found_cleaned'}
    end
    local phase = core.lifecycle_phase
    if phase == 'terminal' then
      redis.call('ZREM', attempt_timeout_key, eid)
      redis.call('ZREM', deadline_key, eid)
      return {1, 'OK', 'already_terminal'}
    end

    local now = ff_now()
    local tag = ff_tag_of(core_key)
    local has_attempt = not ff_empty(core.current_attempt_index)
    if phase == 'active' or phase == 'suspended' then
      if has_attempt then
        redis.call('HSET', attempt_hash, 'attempt_state', 'ended_failure', 'ended_at', now,
          'failure_reason', reason)
      end
    end
    if phase == 'active' then
      ff_close_stream_meta(stream_meta, now, 'expired', false)
      redis.call('DEL', lease_key)
      redis.call('ZREM', lease_expiry_key, eid)
      redis.call('SREM', worker_leases_key, eid)
      redis.call('SREM', ff_key.worker_leases(tag, core.current_worker_instance_id or ''), eid)
      redis.call('ZREM', active_key, eid)
      ff_history(history_key, nil, 'released', {
        'lease_id', core.current_lease_id or '', 'lease_epoch', core.current_lease_epoch or '',
        'attempt_index', core.current_attempt_index or '', 'reason', 'expired:' .. reason,
        'ts', now,
      })
    elseif phase == 'suspended' then
      if redis.call('EXISTS', susp_key) == 1 then
        redis.call('HSET', susp_key, 'closed_at', now, 'close_reason', 'expired:' .. reason)
      end
      ff_close_stream_meta(stream_meta, now, 'expired', false)
      redis.call('ZREM', suspended_key, eid)
      redis.call('ZREM', susp_timeout_key, eid)
    elseif phase == 'runnable' then
      local suffix = RUNNABLE_INDEX[core.eligibility_state or '']
      local lane = ff_lane_of(core)
      if suffix then
        redis.call('ZREM', ff_key.lane(tag, lane, suffix), eid)
      else
        for _, s in ipairs(RUNNABLE_ALL) do redis.call('ZREM', ff_key.lane(tag, lane, s), eid) end
      end
    end

    local attempt_state = 'attempt_terminal'
    if not has_attempt then
      attempt_state = core.attempt_state
      if ff_empty(attempt_state) then attempt_state = 'none' end
    end
    redis.call('HSET', core_key,
      'lifecycle_phase', 'terminal', 'ownership_state', 'unowned',
      'eligibility_state', 'not_applicable', 'blocking_reason', 'none', 'blocking_detail', '',
      'terminal_outcome', 'expired', 'attempt_state', attempt_state, 'public_state', 'expired',
      'failure_reason', reason, 'completed_at', now,
      'current_lease_id', '', 'current_worker_id', '', 'current_worker_instance_id', '',
      'lease_expires_at', '', 'current_suspension_id', '', 'current_waitpoint_id', '',
      'last_transition_at', now, 'last_mutation_at', now)
    redis.call('ZREM', attempt_timeout_key, eid)
    redis.call('ZREM', deadline_key, eid)
    redis.call('ZADD', terminal_key, now, eid)
    return {1, 'OK', 'expired', phase or ''}
  end)
end
