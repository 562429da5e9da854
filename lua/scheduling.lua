-- scheduling.lua — claim/reclaim grants, priority, progress, delayed promotion (contract §5.14–§5.18).
-- Defines ff_runnable_move, the lane-set move budget.lua's block/unblock share with ff_promote_delayed.
--
-- Keys touched:
--   E:core (RW), E:claim_grant (RW, PEXPIREAT), L:eligible (RW), L:delayed (W).
--
-- ff_issue_claim_grant
--   KEYS[1] E:core · KEYS[2] E:claim_grant · KEYS[3] L:eligible
--   ARGV[1] execution_id · ARGV[2] worker_id · ARGV[3] worker_instance_id · ARGV[4] lane_id
--   ARGV[5] capability_hash · ARGV[6] grant_ttl_ms (validated) · ARGV[7] route_snapshot_json
--   ARGV[8] admission_summary · ARGV[9] worker_capabilities_csv ("" = none)
-- ff_change_priority
--   KEYS[1] E:core · KEYS[2] L:eligible
--   ARGV[1] execution_id · ARGV[2] new_priority (validated)
-- ff_update_progress
--   KEYS[1] E:core
--   ARGV[1] execution_id · ARGV[2] lease_id · ARGV[3] lease_epoch · ARGV[4] progress_pct ("" = keep)
--   ARGV[5] progress_message ("" = keep)
-- ff_promote_delayed
--   KEYS[1] E:core · KEYS[2] L:delayed · KEYS[3] L:eligible
--   ARGV[1] execution_id · ARGV[2] now_ms (validated; caller now)
-- ff_issue_reclaim_grant
--   KEYS[1] E:core · KEYS[2] E:claim_grant · KEYS[3] I:lease_expiry (not read)
--   ARGV[1..9] as ff_issue_claim_grant

-- A runnable, unowned execution moving between two of its lane's sets: one HSET of the state vector,
-- then ZREM from `from_key` and ZADD to `to_key` at `score`. The shared write of ff_promote_delayed
-- (L:delayed -> L:eligible) and budget.lua's ff_unblock_execution (L:blocked:<kind> -> L:eligible) and
-- ff_block_execution_for_admission (L:eligible -> L:blocked:<kind>). `s` holds eligibility, reason,
-- detail, public and now, plus attempt_state and delay_until, each written only when given (promote
-- leaves attempt_state alone; only promote clears delay_until), in the contract's field order.
local function ff_runnable_move(core_key, eid, s, from_key, to_key, score)
  local f = {
    'lifecycle_phase', 'runnable', 'ownership_state', 'unowned', 'eligibility_state', s.eligibility,
    'blocking_reason', s.reason, 'blocking_detail', s.detail, 'terminal_outcome', 'none',
  }
  if s.attempt_state then ff_push(f, 'attempt_state', s.attempt_state) end
  ff_push(f, 'public_state', s.public)
  if s.delay_until then ff_push(f, 'delay_until', s.delay_until) end
  ff_push(f, 'last_transition_at', s.now, 'last_mutation_at', s.now)
  redis.call('HSET', core_key, unpack(f))
  redis.call('ZREM', from_key, eid)
  redis.call('ZADD', to_key, score, eid)
end

do
  local MAX_CAP_BYTES = 4096
  local MAX_CAP_TOKENS = 256

  -- Split a capability CSV into its non-empty tokens, enforcing the size bounds.
  -- Returns the token list, or nil plus an invalid_capabilities reply.
  local function cap_tokens(csv, kind)
    if #csv > MAX_CAP_BYTES then
      return nil, ff_err('invalid_capabilities', kind .. ':too_many_bytes')
    end
    local list = {}
    for tok in string.gmatch(csv, '[^,]+') do
      list[#list + 1] = tok
    end
    if #list > MAX_CAP_TOKENS then
      return nil, ff_err('invalid_capabilities', kind .. ':too_many_tokens')
    end
    return list
  end

  -- Shared tail of both grant functions: capability match, then the grant hash.
  -- `required_csv` is the stored required_capabilities field (may be nil).
  local function issue_grant(core_key, grant_key, args, required_csv, ttl)
    local required, err = cap_tokens(required_csv or '', 'required')
    if err then return err end
    local worker
    worker, err = cap_tokens(args[9] or '', 'worker')
    if err then return err end

    local now = ff_now()
    if #required > 0 then
      local have = {}
      for i = 1, #worker do have[worker[i]] = true end
      local missing, seen = {}, {}
      for i = 1, #required do
        local cap = required[i]
        if not have[cap] and not seen[cap] then
          seen[cap] = true
          missing[#missing + 1] = cap
        end
      end
      if #missing > 0 then
        -- error with side effect: the stamp lets operators see why nothing claims it
        redis.call('HSET', core_key, 'last_capability_mismatch_at', now)
        table.sort(missing)
        return ff_err('capability_mismatch', table.concat(missing, ','))
      end
    end

    local expires = now + ttl
    redis.call('HSET', grant_key,
      'worker_id', args[2] or '',
      'worker_instance_id', args[3] or '',
      'lane_id', args[4] or '',
      'capability_hash', args[5] or '',
      'route_snapshot_json', args[7] or '',
      'admission_summary', args[8] or '',
      'created_at', now,
      'grant_expires_at', expires)
    redis.call('PEXPIREAT', grant_key, expires)
    return ff_ok(args[1])
  end

  redis.register_function('ff_issue_claim_grant', function(keys, args)
    local core_key, grant_key, eligible_key = keys[1], keys[2], keys[3]
    local eid, ttl_arg = args[1], args[6]

    local bad = ff_require_number(ttl_arg, 'grant_ttl_ms')
    if bad then return bad end

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'eligibility_state', 'required_capabilities')
    local phase = c[1]
    if not phase then return ff_err('execution_not_found') end
    if phase ~= 'runnable' or c[2] ~= 'eligible_now' then return ff_err('execution_not_eligible') end
    if redis.call('EXISTS', grant_key) == 1 then return ff_err('grant_already_exists') end
    if not redis.call('ZSCORE', eligible_key, eid) then return ff_err('execution_not_in_eligible_set') end
    -- The eid stays in the eligible set: ff_claim_execution removes it when the grant is consumed.
    return issue_grant(core_key, grant_key, args, c[3] or nil, math.floor(tonumber(ttl_arg)))
  end)

  redis.register_function('ff_issue_reclaim_grant', function(keys, args)
    local core_key, grant_key = keys[1], keys[2]
    local ttl_arg = args[6]

    local bad = ff_require_number(ttl_arg, 'grant_ttl_ms')
    if bad then return bad end

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'ownership_state', 'required_capabilities')
    local phase = c[1]
    if not phase then return ff_err('execution_not_found') end
    if phase ~= 'active' then return ff_err('execution_not_reclaimable') end
    if c[2] ~= 'lease_expired_reclaimable' and c[2] ~= 'lease_revoked' then
      return ff_err('execution_not_reclaimable')
    end
    if redis.call('EXISTS', grant_key) == 1 then return ff_err('grant_already_exists') end
    -- I:lease_expiry is left alone: the reclaim itself re-scores it.
    return issue_grant(core_key, grant_key, args, c[3] or nil, math.floor(tonumber(ttl_arg)))
  end)

  redis.register_function('ff_change_priority', function(keys, args)
    local core_key, eligible_key = keys[1], keys[2]
    local eid, prio_arg = args[1], args[2]

    local bad = ff_require_number(prio_arg, 'new_priority')
    if bad then return bad end

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'eligibility_state', 'priority', 'created_at')
    if not c[1] then return ff_err('execution_not_found') end
    if c[1] ~= 'runnable' or c[2] ~= 'eligible_now' then return ff_err('execution_not_eligible') end

    -- Clamped but not truncated: a fractional priority is stored and scored as given.
    local p = ff_clamp_priority(tonumber(prio_arg))
    local now = ff_now()
    redis.call('HSET', core_key, 'priority', p, 'last_mutation_at', now)
    redis.call('ZADD', eligible_key, ff_eligible_score(p, c[4]), eid)
    return ff_ok(c[3] or '', tostring(p))
  end)

  redis.register_function('ff_update_progress', function(keys, args)
    local core_key = keys[1]
    local lease_id, lease_epoch, pct, message = args[2], args[3], args[4], args[5]

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'terminal_outcome', 'current_lease_epoch',
      'ownership_state', 'lease_expires_at', 'current_lease_id')
    if not c[1] then return ff_err('execution_not_found') end
    if c[1] ~= 'active' then return ff_err('execution_not_active', c[2] or '', c[3] or '') end
    if c[4] == 'lease_revoked' then return ff_err('lease_revoked') end
    local now = ff_now()
    -- Unlike LV, progress does not mark the lease expired; the scanner does that.
    if (tonumber(c[5]) or 0) <= now then return ff_err('lease_expired') end
    if c[6] ~= lease_id or c[3] ~= lease_epoch then return ff_err('stale_lease') end

    local argv = {'HSET', core_key, 'last_mutation_at', now, 'progress_updated_at', now}
    if not ff_empty(pct) then
      argv[#argv + 1] = 'progress_pct'
      argv[#argv + 1] = pct
    end
    if not ff_empty(message) then
      argv[#argv + 1] = 'progress_message'
      argv[#argv + 1] = message
    end
    redis.call(unpack(argv))
    return ff_ok()
  end)

  redis.register_function('ff_promote_delayed', function(keys, args)
    local core_key, delayed_key, eligible_key = keys[1], keys[2], keys[3]
    local eid, now_arg = args[1], args[2]

    local bad = ff_require_number(now_arg, 'now_ms')
    if bad then return bad end
    local now = tonumber(now_arg)

    local c = redis.call('HMGET', core_key, 'lifecycle_phase', 'eligibility_state', 'delay_until',
      'priority', 'created_at')
    if not c[1] then
      redis.call('ZREM', delayed_key, eid)
      return ff_ok('not_found_cleaned')
    end
    if c[1] ~= 'runnable' then
      redis.call('ZREM', delayed_key, eid)
      return ff_ok('not_runnable_cleaned')
    end
    if c[2] ~= 'not_eligible_until_time' then
      redis.call('ZREM', delayed_key, eid)
      return ff_ok('not_delayed_cleaned')
    end
    -- Contract §10 row 1 (fix): an empty delay_until (left by an upstream delayed resume) reads
    -- like a missing one, i.e. due now, instead of raising. The scanner only calls us once the
    -- delayed-set score is due, so this promotes such executions on time.
    if (tonumber(c[3]) or 0) > now then return ff_ok('not_yet_due') end

    -- attempt_state is deliberately untouched: it tells the next claim whether this is an
    -- initial/retry/replay claim or a resume of the interrupted attempt.
    ff_runnable_move(core_key, eid, {
      eligibility = 'eligible_now', reason = 'waiting_for_worker', detail = '', public = 'waiting',
      delay_until = '', now = now,
    }, delayed_key, eligible_key, ff_eligible_score(c[4], c[5]))
    return ff_ok('promoted')
  end)
end
