-- lease.lua — lease renewal, expiry marking and operator revocation (contract §5.11–§5.13).
--
-- Keys touched:
--   E:core (RW), E:lease:current (W), E:lease:history (W, XADD), I:lease_expiry (W),
--   I:worker:<wiid>:leases (W, revoke), dynamic S(current_attempt_index):meta (W, via MARK-EXPIRED).
--
-- ff_renew_lease
--   KEYS[1] E:core · KEYS[2] E:lease:current · KEYS[3] E:lease:history · KEYS[4] I:lease_expiry
--   ARGV[1] execution_id · ARGV[2] attempt_index · ARGV[3] attempt_id · ARGV[4] lease_id
--   ARGV[5] lease_epoch · ARGV[6] lease_ttl_ms (validated) · ARGV[7] lease_history_grace_ms (validated)
-- ff_mark_lease_expired_if_due
--   KEYS[1] E:core · KEYS[2] E:lease:current (unused) · KEYS[3] I:lease_expiry · KEYS[4] E:lease:history
--   ARGV[1] execution_id
-- ff_revoke_lease
--   KEYS[1] E:core · KEYS[2] E:lease:current · KEYS[3] E:lease:history · KEYS[4] I:lease_expiry
--   KEYS[5] I:worker:<current_worker_instance_id>:leases
--   ARGV[1] execution_id · ARGV[2] expected_lease_id ("" = skip check) · ARGV[3] revoke_reason (absent → operator)

do
  -- Every core field these functions (and MARK-EXPIRED / the revoke history entry) read. One HMGET
  -- of these is much cheaper than HGETALL of the ~55-field record on the hot renew path.
  local LEASE_FIELDS = {
    'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state', 'terminal_outcome',
    'lease_expires_at', 'lease_revoked_at', 'current_lease_id', 'current_lease_epoch',
    'current_attempt_index', 'current_attempt_id', 'current_worker_id', 'current_worker_instance_id',
  }

  redis.register_function('ff_renew_lease', function(keys, args)
    local core_key, lease_key, history_key, expiry_key = keys[1], keys[2], keys[3], keys[4]
    local eid, attempt_index, attempt_id = args[1], args[2], args[3]
    local lease_id, lease_epoch = args[4], args[5]
    local ttl_arg, grace_arg = args[6], args[7]

    local bad = ff_require_number(ttl_arg, 'lease_ttl_ms')
      or ff_require_number(grace_arg, 'lease_history_grace_ms')
    if bad then return bad end

    local core = ff_hmget(core_key, LEASE_FIELDS)
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'active' then
      return ff_err('execution_not_active', core.terminal_outcome or '', core.current_lease_epoch or '')
    end
    if core.ownership_state == 'lease_revoked' or not ff_empty(core.lease_revoked_at) then
      return ff_err('lease_revoked')
    end
    local now = ff_now()
    if (tonumber(core.lease_expires_at) or 0) <= now then
      -- error with side effects: the expiry is recorded so the reclaim path can take over
      ff_mark_expired(core_key, history_key, core, now, 1000)
      return ff_err('lease_expired')
    end
    if core.current_attempt_index ~= attempt_index or core.current_attempt_id ~= attempt_id
        or core.current_lease_id ~= lease_id or core.current_lease_epoch ~= lease_epoch then
      return ff_err('stale_lease')
    end

    local ttl = math.floor(tonumber(ttl_arg))
    local expires = now + ttl
    local deadline = now + math.floor(ttl * 2 / 3)
    redis.call('HSET', core_key, 'lease_last_renewed_at', now, 'lease_renewal_deadline', deadline,
      'lease_expires_at', expires, 'last_mutation_at', now)
    redis.call('HSET', lease_key, 'last_renewed_at', now, 'renewal_deadline', deadline,
      'expires_at', expires)
    redis.call('PEXPIREAT', lease_key, expires + math.floor(tonumber(grace_arg)))
    redis.call('ZADD', expiry_key, expires, eid)
    return ff_ok(tostring(expires))
  end)

  redis.register_function('ff_mark_lease_expired_if_due', function(keys, args)
    local core_key, expiry_key, history_key = keys[1], keys[3], keys[4]
    local eid = args[1]

    local core = ff_hmget(core_key, LEASE_FIELDS)
    if not core then
      redis.call('ZREM', expiry_key, eid)
      return {1, 'ALREADY_SATISFIED', 'execution_not_found'}
    end
    if core.lifecycle_phase ~= 'active' then
      redis.call('ZREM', expiry_key, eid)
      return {1, 'ALREADY_SATISFIED', 'not_active'}
    end
    local own = core.ownership_state
    if own == 'lease_expired_reclaimable' then return {1, 'ALREADY_SATISFIED', 'already_expired'} end
    if own == 'lease_revoked' then return {1, 'ALREADY_SATISFIED', 'already_revoked'} end
    if own == 'unowned' then
      redis.call('ZREM', expiry_key, eid)
      return {1, 'ALREADY_SATISFIED', 'unowned'}
    end
    local now = ff_now()
    if (tonumber(core.lease_expires_at) or 0) > now then
      return {1, 'ALREADY_SATISFIED', 'not_yet_expired'}
    end
    -- The eid stays in I:lease_expiry; reclaim (or a terminal transition) removes it.
    ff_mark_expired(core_key, history_key, core, now, 1000)
    return ff_ok('marked_expired')
  end)

  redis.register_function('ff_revoke_lease', function(keys, args)
    local core_key, lease_key, history_key = keys[1], keys[2], keys[3]
    local expiry_key, worker_leases_key = keys[4], keys[5]
    local eid, expected_lease_id = args[1], args[2]
    local reason = args[3]
    if reason == nil then reason = 'operator' end

    local core = ff_hmget(core_key, LEASE_FIELDS)
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'active' then
      return ff_err('execution_not_active', core.terminal_outcome or '', core.current_lease_epoch or '')
    end
    local own = core.ownership_state
    if own == 'lease_revoked' then return {1, 'ALREADY_SATISFIED', 'already_revoked'} end
    if own == 'lease_expired_reclaimable' then return {1, 'ALREADY_SATISFIED', 'already_expired'} end
    if own ~= 'leased' then return ff_err('no_active_lease') end
    local lease_id = core.current_lease_id or ''
    if not ff_empty(expected_lease_id) and expected_lease_id ~= lease_id then
      return ff_err('stale_lease', 'expected ' .. expected_lease_id .. ' but current is ' .. lease_id)
    end

    local now = ff_now()
    local epoch = core.current_lease_epoch or ''
    local eligibility = core.eligibility_state
    if ff_empty(eligibility) then eligibility = 'not_applicable' end
    -- Lease identity fields stay on the core record: reclaim reads them for the history entry.
    redis.call('HSET', core_key,
      'lifecycle_phase', 'active',
      'ownership_state', 'lease_revoked',
      'eligibility_state', eligibility,
      'blocking_reason', 'waiting_for_worker',
      'blocking_detail', 'lease revoked: ' .. reason,
      'terminal_outcome', 'none',
      'attempt_state', 'attempt_interrupted',
      'public_state', 'active',
      'lease_revoked_at', now,
      'lease_revoke_reason', reason,
      'last_mutation_at', now)
    redis.call('DEL', lease_key)
    redis.call('ZREM', expiry_key, eid)
    redis.call('SREM', worker_leases_key, eid)
    ff_history(history_key, 1000, 'revoked', {
      'lease_id', lease_id,
      'lease_epoch', epoch,
      'attempt_index', core.current_attempt_index or '',
      'attempt_id', core.current_attempt_id or '',
      'worker_id', core.current_worker_id or '',
      'worker_instance_id', core.current_worker_instance_id or '',
      'reason', reason,
      'ts', now,
    })
    return ff_ok('revoked', lease_id, epoch)
  end)
end
