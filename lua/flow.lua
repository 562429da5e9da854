-- flow.lua — flows, DAG dependency edges, dependency resolution and replay (contract §5.39–§5.47).
--
-- Keys touched:
--   F:core (RW), F:members (RW), I:flow_index (W), F:edge:<e> (RW), F:out:<eid> (RW), F:in:<eid> (W),
--   E:core (RW), E:deps:meta (RW), E:deps:unresolved (RW), E:deps:all_edges (W), E:dep:<e> (RW),
--   E:payload (W, COPY target), upstream E:result (R, COPY source), A(i) (W), S(i):meta (W),
--   E:lease:history (W), E:policy (R, replay; derived from KEYS[1]),
--   L:eligible, L:terminal, L:blocked:dependencies (W).
--   v0.13: F:edgegroup:<eid> (RW), F:edgegroup:<eid>:cancelled (W, ours), I:pending_cancel_groups (RW),
--   F:pending_cancels (RW), I:cancel_backlog (RW).
--   Dynamic: F:out:<eid> and F:edge:<e> of the same flow during cycle detection (read only); F:edge:<e> and
--   sibling E:core (read only) when a cancel_remaining group fires or is reconciled; F:edgegroup:<eid> on replay.
--
-- ff_create_flow
--   KEYS[1] F:core · KEYS[2] F:members (unused) · KEYS[3] I:flow_index
--   ARGV[1] flow_id · ARGV[2] flow_kind · ARGV[3] namespace · ARGV[4] now_ms (ignored: server now)
-- ff_add_execution_to_flow
--   KEYS[1] F:core · KEYS[2] F:members · KEYS[3] I:flow_index · KEYS[4] E:core of the member
--   ARGV[1] flow_id · ARGV[2] execution_id · ARGV[3] now_ms (ignored: server now)
-- ff_cancel_flow
--   KEYS[1] F:core · KEYS[2] F:members · KEYS[3] I:flow_index (not touched)
--   ARGV[1] flow_id · ARGV[2] reason · ARGV[3] cancellation_policy · ARGV[4] now_ms (ignored)
--   v0.13 shape (5 KEYS): KEYS[4] F:pending_cancels · KEYS[5] I:cancel_backlog · ARGV[5] grace_ms (empty → 30000):
--   a cancel_all with members also records every member as owed and schedules the flow at now + grace.
-- ff_ack_cancel_member (v0.13)
--   KEYS[1] F:pending_cancels · KEYS[2] I:cancel_backlog · ARGV[1] execution_id · ARGV[2] flow_id
-- ff_set_edge_group_policy (v0.13)
--   KEYS[1] F:core · KEYS[2] F:edgegroup:<downstream>
--   ARGV[1] policy_variant (all_of / any_of / quorum) · ARGV[2] on_satisfied (cancel_remaining / let_run)
--   ARGV[3] k (quorum) · ARGV[4] now_ms
-- ff_drain_sibling_cancel_group (v0.13)
--   KEYS[1] I:pending_cancel_groups · KEYS[2] F:edgegroup:<downstream>
--   ARGV[1] flow_id · ARGV[2] downstream_eid
--   ours, optional: KEYS[3] F:edgegroup:<downstream>:cancelled · ARGV[3..] the siblings the dispatcher cancelled
-- ff_reconcile_sibling_cancel_group (v0.13)
--   KEYS[1] I:pending_cancel_groups · KEYS[2] F:edgegroup:<downstream> · ARGV[1] flow_id · ARGV[2] downstream_eid
-- ff_stage_dependency_edge
--   KEYS[1] F:core · KEYS[2] F:members · KEYS[3] F:edge:<e> · KEYS[4] F:out:<upstream>
--   KEYS[5] F:in:<downstream> · KEYS[6] F:grant:<e> (unused)
--   ARGV[1] flow_id · ARGV[2] edge_id · ARGV[3] upstream_eid · ARGV[4] downstream_eid
--   ARGV[5] dependency_kind (absent → success_only) · ARGV[6] data_passing_ref (absent → "")
--   ARGV[7] expected_graph_revision (text compare) · ARGV[8] now_ms (caller now, verbatim)
-- ff_apply_dependency_to_child
--   KEYS[1] E:core (child) · KEYS[2] E:deps:meta · KEYS[3] E:deps:unresolved · KEYS[4] E:dep:<e>
--   KEYS[5] L:eligible · KEYS[6] L:blocked:dependencies · KEYS[7] E:deps:all_edges
--   ARGV[1] flow_id · ARGV[2] edge_id · ARGV[3] upstream_eid · ARGV[4] graph_revision
--   ARGV[5] dependency_kind (absent → success_only) · ARGV[6] data_passing_ref (absent → "")
--   ARGV[7] now_ms (caller now, verbatim)
--   v0.13 shape: KEYS[8] F:edgegroup:<child> (created as all_of on the first edge, else its n counted up)
-- ff_resolve_dependency
--   KEYS[1] E:core (child) · KEYS[2] E:deps:meta · KEYS[3] E:deps:unresolved · KEYS[4] E:dep:<e>
--   KEYS[5] L:eligible · KEYS[6] L:terminal · KEYS[7] L:blocked:dependencies
--   KEYS[8] A(child current_attempt_index) · KEYS[9] S(same):meta · KEYS[10] E:payload (child)
--   KEYS[11] upstream E:result
--   ARGV[1] edge_id · ARGV[2] upstream_outcome (success → satisfied, else impossible)
--   ARGV[3] now_ms (caller now, verbatim; also the terminal ZSET score)
--   v0.13 shape: KEYS[12] F:edgegroup:<child> · KEYS[13] F:in:<child> · KEYS[14] I:pending_cancel_groups
--   ARGV[4] flow_id · ARGV[5] downstream_eid. An any_of / quorum group decides the child (see
--   ff_resolve_edge_group); an all_of group only has its counters kept.
-- ff_evaluate_flow_eligibility (read-only)
--   KEYS[1] E:core · KEYS[2] E:deps:meta
-- ff_promote_blocked_to_eligible
--   KEYS[1] E:core · KEYS[2] L:blocked:dependencies · KEYS[3] L:eligible · KEYS[4] E:deps:meta
--   KEYS[5] E:deps:unresolved
--   ARGV[1] execution_id · ARGV[2] now_ms (caller now, stored)
-- ff_replay_execution
--   KEYS[1] E:core · KEYS[2] L:terminal · KEYS[3] L:eligible · KEYS[4] E:lease:history
--   skipped flow member only: KEYS[5] L:blocked:dependencies · KEYS[6] E:deps:meta
--   KEYS[7] E:deps:unresolved · KEYS[8..7+E] E:dep:<edge_j>
--   ARGV[1] execution_id · ARGV[2] now_ms (ignored: server now) · ARGV[3..2+E] edge ids (order of KEYS[8..])
--   A skipped member's F:edgegroup:<eid> (built from KEYS[1]'s tag and the core's flow_id), when it exists, is
--   reopened: counters from the edges' states, group_state pending.

-- Attempt state a freshly eligible execution carries (empty / none → pending_first_attempt).
local function ff_pending_attempt_state(s)
  if ff_empty(s) or s == 'none' then return 'pending_first_attempt' end
  return s
end

-- A member blocked only by its dependencies becomes eligible (both resolvers: all_of and the edge groups).
local function ff_release_dependent(k, core, now)
  redis.call('HSET', k.core, 'eligibility_state', 'eligible_now',
    'blocking_reason', 'waiting_for_worker', 'blocking_detail', '',
    'attempt_state', ff_pending_attempt_state(core.attempt_state), 'public_state', 'waiting',
    'last_transition_at', now, 'last_mutation_at', now)
  redis.call('ZREM', k.blocked, core.execution_id)
  redis.call('ZADD', k.eligible, ff_eligible_score(core.priority, core.created_at), core.execution_id)
end

-- The success branch of ff_resolve_dependency, shared with the fast path (fastpath.lua), which
-- resolves a completed member's outgoing edges in the same call. `k` holds the child's keys (core,
-- meta, unresolved, dep, eligible, blocked, payload) and the upstream's result key; `dep` the edge's
-- {state, data_passing_ref} (unresolved). Returns the injected marker and whether the child became
-- eligible.
local function ff_satisfy_dependency(k, dep, edge_id, now)
  local core = ff_hmget(k.core, { 'execution_id', 'lifecycle_phase', 'ownership_state',
    'eligibility_state', 'terminal_outcome', 'attempt_state', 'priority', 'created_at' })
  redis.call('HSET', k.dep, 'state', 'satisfied', 'last_resolved_at', now)
  redis.call('SREM', k.unresolved, edge_id)
  local remaining = redis.call('HINCRBY', k.meta, 'unsatisfied_required_count', -1)
  redis.call('HSET', k.meta, 'last_dependency_update_at', now)
  if k.group and redis.call('EXISTS', k.group) == 1 then
    -- all_of group record (v0.13): counters only; deps:meta still decides.
    redis.call('HINCRBY', k.group, 'succeeded', 1)
    if remaining == 0 then redis.call('HSET', k.group, 'group_state', 'satisfied') end
  end
  if not core then return '', false end
  local injected = ''
  if not ff_empty(dep.data_passing_ref) and core.terminal_outcome == 'none' then
    if redis.call('COPY', k.result, k.payload, 'REPLACE') == 1 then injected = 'data_injected' end
  end
  if remaining == 0 and core.lifecycle_phase == 'runnable' and core.ownership_state == 'unowned'
      and core.terminal_outcome == 'none' and core.eligibility_state == 'blocked_by_dependencies' then
    ff_release_dependent(k, core, now)
    return injected, true
  end
  return injected, false
end

do
  local TERMINAL_FLOW = { cancelled = true, completed = true, failed = true }
  local MAX_CYCLE_WALK = 1000

  -- True when a path downstream → ... → upstream exists (or the walk exceeds MAX_CYCLE_WALK nodes).
  -- The walked F:out:<eid> and F:edge:<e> keys are built from KEYS[1] (F:core), keeping the caller's tag.
  local function closes_cycle(flow_core, upstream, downstream)
    local queue, seen, head = { downstream }, { [downstream] = true }, 1
    while head <= #queue do
      if head > MAX_CYCLE_WALK then return true end
      local node = queue[head]
      head = head + 1
      local edges = redis.call('SMEMBERS', ff_key.of_core(flow_core, 'out', node))
      for i = 1, #edges do
        local nxt = redis.call('HGET', ff_key.of_core(flow_core, 'edge', edges[i]), 'downstream_execution_id')
        if nxt then
          if nxt == upstream then return true end
          if not seen[nxt] then
            seen[nxt] = true
            queue[#queue + 1] = nxt
          end
        end
      end
    end
    return false
  end

  redis.register_function('ff_create_flow', function(keys, args)
    local core_key, index_key = keys[1], keys[3]
    local flow_id, flow_kind, namespace = args[1], args[2], args[3]

    redis.call('SADD', index_key, flow_id)
    if redis.call('EXISTS', core_key) == 1 then
      return {1, 'ALREADY_SATISFIED', flow_id}
    end
    local now = ff_now()
    redis.call('HSET', core_key, 'flow_id', flow_id, 'flow_kind', flow_kind, 'namespace', namespace,
      'graph_revision', '0', 'node_count', '0', 'edge_count', '0', 'public_flow_state', 'open',
      'created_at', now, 'last_mutation_at', now)
    return ff_ok(flow_id)
  end)

  redis.register_function('ff_add_execution_to_flow', function(keys, args)
    local core_key, members_key, index_key, exec_key = keys[1], keys[2], keys[3], keys[4]
    local flow_id, eid = args[1], args[2]

    local flow = ff_hmget(core_key, { 'public_flow_state', 'node_count' })
    if not flow then return ff_err('flow_not_found') end
    if TERMINAL_FLOW[flow.public_flow_state] then return ff_err('flow_already_terminal') end
    if redis.call('EXISTS', exec_key) == 0 then return ff_err('execution_not_found') end

    redis.call('SADD', index_key, flow_id)
    local existing = redis.call('HGET', exec_key, 'flow_id')
    local foreign = not ff_empty(existing) and existing ~= flow_id
    if redis.call('SISMEMBER', members_key, eid) == 1 then
      if foreign then return ff_err('already_member_of_different_flow:' .. existing) end
      redis.call('HSET', exec_key, 'flow_id', flow_id)
      return {1, 'ALREADY_SATISFIED', eid, flow.node_count or '0'}
    end
    if foreign then return ff_err('already_member_of_different_flow:' .. existing) end

    redis.call('SADD', members_key, eid)
    redis.call('HSET', exec_key, 'flow_id', flow_id)
    local nodes = redis.call('HINCRBY', core_key, 'node_count', 1)
    redis.call('HINCRBY', core_key, 'graph_revision', 1)
    redis.call('HSET', core_key, 'last_mutation_at', ff_now())
    return ff_ok(eid, tostring(nodes))
  end)

  redis.register_function('ff_cancel_flow', function(keys, args)
    local core_key, members_key = keys[1], keys[2]
    local pending_key, backlog_key = keys[4], keys[5]
    local flow_id, reason, policy = args[1], args[2], args[3]

    -- v0.13 shape only (5 KEYS): a finite whole grace in ms, checked before anything is read or written.
    local grace = 30000
    if backlog_key and not ff_empty(args[5]) then
      grace = tonumber(args[5])
      if not grace or grace ~= grace or grace < 0 or grace > 9007199254740991 or grace ~= math.floor(grace) then
        return ff_err('invalid_grace_ms')
      end
    end

    local flow = ff_hmget(core_key, { 'public_flow_state' })
    if not flow then return ff_err('flow_not_found') end
    if TERMINAL_FLOW[flow.public_flow_state] then return ff_err('flow_already_terminal') end

    local now = ff_now()
    redis.call('HSET', core_key, 'public_flow_state', 'cancelled', 'cancelled_at', now,
      'cancel_reason', reason, 'cancellation_policy', policy, 'last_mutation_at', now)
    -- Members are cancelled by the caller, one ff_cancel_execution each.
    local reply = {1, 'OK', policy}
    local members = redis.call('SMEMBERS', members_key)
    for i = 1, #members do reply[#reply + 1] = members[i] end
    if backlog_key and policy == 'cancel_all' and #members > 0 then
      -- Owed member cancels, acknowledged one by one (ff_ack_cancel_member); chunked under unpack's limit.
      for i = 1, #members, 1000 do
        redis.call('SADD', pending_key, unpack(members, i, math.min(i + 999, #members)))
      end
      redis.call('ZADD', backlog_key, now + grace, flow_id)
    end
    return reply
  end)

  redis.register_function('ff_ack_cancel_member', function(keys, args)
    local pending_key, backlog_key = keys[1], keys[2]
    redis.call('SREM', pending_key, args[1])
    if redis.call('EXISTS', pending_key) == 0 then redis.call('ZREM', backlog_key, args[2]) end
    return ff_ok()
  end)

  redis.register_function('ff_set_edge_group_policy', function(keys, args)
    local core_key, group_key = keys[1], keys[2]
    local variant, on_satisfied, k, now = args[1], args[2] or '', tonumber(args[3] or '0') or 0, args[4]

    if redis.call('EXISTS', core_key) == 0 then return ff_err('flow_not_found') end
    if variant ~= 'all_of' and variant ~= 'any_of' and variant ~= 'quorum' then
      return ff_err('invalid_input', 'unsupported_policy_variant: ' .. tostring(variant))
    end
    if variant == 'quorum' and k < 1 then return ff_err('invalid_input', 'quorum k must be >= 1') end
    if variant ~= 'all_of' and on_satisfied ~= 'cancel_remaining' and on_satisfied ~= 'let_run' then
      return ff_err('invalid_input', 'on_satisfied required for any_of/quorum: cancel_remaining | let_run')
    end
    -- The policy is fixed once an edge into this member was applied (the record counts them in n).
    if (tonumber(redis.call('HGET', group_key, 'n')) or 0) > 0 then
      return ff_err('invalid_input', 'edge_group_policy_already_fixed: dependencies already staged')
    end
    if redis.call('HGET', group_key, 'policy_variant') == variant then return ff_ok('already_set') end
    redis.call('HSET', group_key, 'policy_variant', variant, 'on_satisfied', on_satisfied, 'k', tostring(k),
      'n', '0', 'succeeded', '0', 'failed', '0', 'skipped', '0', 'group_state', 'pending', 'created_at', now)
    return ff_ok('set')
  end)

  redis.register_function('ff_drain_sibling_cancel_group', function(keys, args)
    local pending_key, group_key, record_key = keys[1], keys[2], keys[3]
    local flow_id, down = args[1] or '', args[2] or ''
    if ff_empty(flow_id) or ff_empty(down) then
      return ff_err('invalid_args', 'flow_id and downstream_eid required')
    end
    local removed = redis.call('SREM', pending_key, flow_id .. '|' .. down)
    local exists = redis.call('EXISTS', group_key) == 1
    if exists then
      redis.call('HDEL', group_key, 'cancel_siblings_pending_flag', 'cancel_siblings_pending_members')
    end
    -- Ours: which siblings this group cancelled, for the DAG view (the record above forgets them).
    if record_key and #args > 2 then
      redis.call('SADD', record_key, unpack(args, 3))
    end
    if removed == 0 then return ff_ok('already_drained', '') end
    if not exists then return ff_ok('drained_sans_group', '') end
    return ff_ok('drained', '')
  end)

  redis.register_function('ff_reconcile_sibling_cancel_group', function(keys, args)
    local pending_key, group_key = keys[1], keys[2]
    local flow_id, down = args[1] or '', args[2] or ''
    if ff_empty(flow_id) or ff_empty(down) then
      return ff_err('invalid_args', 'flow_id and downstream_eid required')
    end
    local member = flow_id .. '|' .. down
    if redis.call('SISMEMBER', pending_key, member) == 0 then return ff_ok('no_op', 'not_in_set') end
    if redis.call('EXISTS', group_key) == 0 then
      redis.call('SREM', pending_key, member)
      return ff_ok('sremmed_stale', 'missing_edgegroup')
    end
    local g = ff_hmget(group_key, { 'cancel_siblings_pending_flag', 'cancel_siblings_pending_members' })
    if g.cancel_siblings_pending_flag ~= 'true' then
      redis.call('SREM', pending_key, member)
      return ff_ok('sremmed_stale', 'flag_cleared')
    end
    -- The dispatcher owns a group while one listed sibling still runs (a missing core counts as ended).
    local tag = ff_tag_of(group_key)
    for sib in string.gmatch(g.cancel_siblings_pending_members or '', '([^|]+)') do
      local phase = redis.call('HGET', ff_key.exec(tag, sib, 'core'), 'lifecycle_phase')
      if not ff_empty(phase) and phase ~= 'terminal' then return ff_ok('no_op', 'siblings_running') end
    end
    redis.call('HDEL', group_key, 'cancel_siblings_pending_flag', 'cancel_siblings_pending_members')
    redis.call('SREM', pending_key, member)
    return ff_ok('completed_drain', '')
  end)

  redis.register_function('ff_stage_dependency_edge', function(keys, args)
    local core_key, members_key, edge_key, out_key, in_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local flow_id, edge_id, upstream, downstream = args[1], args[2], args[3], args[4]
    local kind = args[5]
    if #args < 5 then kind = 'success_only' end
    local data_ref = args[6]
    if #args < 6 then data_ref = '' end
    local expected_rev, now = args[7], args[8]

    if upstream == downstream then return ff_err('self_referencing_edge') end
    local flow = ff_hmget(core_key, { 'public_flow_state', 'graph_revision' })
    if not flow then return ff_err('flow_not_found') end
    if TERMINAL_FLOW[flow.public_flow_state] then return ff_err('flow_already_terminal') end
    if (flow.graph_revision or '0') ~= expected_rev then return ff_err('stale_graph_revision') end
    if redis.call('SISMEMBER', members_key, upstream) == 0
        or redis.call('SISMEMBER', members_key, downstream) == 0 then
      return ff_err('execution_not_in_flow')
    end
    if closes_cycle(core_key, upstream, downstream) then return ff_err('cycle_detected') end
    if redis.call('EXISTS', edge_key) == 1 then return ff_err('dependency_already_exists') end

    redis.call('HSET', edge_key, 'edge_id', edge_id, 'flow_id', flow_id,
      'upstream_execution_id', upstream, 'downstream_execution_id', downstream,
      'dependency_kind', kind, 'satisfaction_condition', 'all_required', 'data_passing_ref', data_ref,
      'edge_state', 'pending', 'created_at', now, 'created_by', 'engine')
    redis.call('SADD', out_key, edge_id)
    redis.call('SADD', in_key, edge_id)
    local rev = redis.call('HINCRBY', core_key, 'graph_revision', 1)
    redis.call('HINCRBY', core_key, 'edge_count', 1)
    redis.call('HSET', core_key, 'last_mutation_at', now)
    return ff_ok(edge_id, tostring(rev))
  end)

  redis.register_function('ff_apply_dependency_to_child', function(keys, args)
    local core_key, meta_key, unresolved_key, dep_key = keys[1], keys[2], keys[3], keys[4]
    local eligible_key, blocked_key, all_edges_key, group_key = keys[5], keys[6], keys[7], keys[8]
    local flow_id, edge_id, upstream, graph_rev = args[1], args[2], args[3], args[4]
    local kind = args[5]
    if #args < 5 then kind = 'success_only' end
    local data_ref = args[6]
    if #args < 6 then data_ref = '' end
    local now = args[7]
    if graph_rev == nil or now == nil then
      -- Upstream raises on the deps:meta HSET after the edge writes; raise before any write instead.
      error('ff_apply_dependency_to_child: graph_revision and now_ms are required')
    end

    local core = ff_hmget(core_key, { 'execution_id', 'flow_id', 'lifecycle_phase', 'ownership_state',
      'terminal_outcome', 'attempt_state', 'created_at' })
    if not core then return ff_err('execution_not_found') end
    if not ff_empty(core.flow_id) and core.flow_id ~= flow_id then
      return ff_err('execution_already_in_flow')
    end
    if redis.call('EXISTS', dep_key) == 1 then return ff_ok('already_applied') end

    local eid = core.execution_id or ''
    redis.call('HSET', dep_key, 'edge_id', edge_id, 'flow_id', flow_id, 'upstream_execution_id', upstream,
      'downstream_execution_id', eid, 'dependency_kind', kind, 'state', 'unsatisfied',
      'data_passing_ref', data_ref, 'last_resolved_at', '')
    redis.call('SADD', unresolved_key, edge_id)
    redis.call('SADD', all_edges_key, edge_id)
    local n = redis.call('HINCRBY', meta_key, 'unsatisfied_required_count', 1)
    redis.call('HSET', meta_key, 'flow_id', flow_id, 'last_flow_graph_revision', graph_rev,
      'last_dependency_update_at', now)
    if not ff_empty(group_key) then
      -- v0.13 edge-group record: all_of unless ff_set_edge_group_policy chose first.
      if redis.call('HEXISTS', group_key, 'policy_variant') == 0 then
        redis.call('HSET', group_key, 'policy_variant', 'all_of', 'n', '1', 'succeeded', '0', 'group_state', 'pending')
      else
        redis.call('HINCRBY', group_key, 'n', 1)
      end
    end

    -- Only a waiting child is parked; an active/suspended one learns of the edge on resolve.
    if core.lifecycle_phase == 'runnable' and core.terminal_outcome == 'none' then
      redis.call('HSET', core_key,
        'lifecycle_phase', core.lifecycle_phase,
        'ownership_state', core.ownership_state or '',
        'eligibility_state', 'blocked_by_dependencies',
        'blocking_reason', 'waiting_for_children',
        'blocking_detail', n .. ' dep(s) unresolved incl ' .. edge_id,
        'terminal_outcome', core.terminal_outcome,
        'attempt_state', ff_empty(core.attempt_state) and 'pending_first_attempt' or core.attempt_state,
        'public_state', 'waiting_children',
        'last_transition_at', now, 'last_mutation_at', now)
      redis.call('ZREM', eligible_key, eid)
      redis.call('ZADD', blocked_key, core.created_at or 0, eid)
    end
    return ff_ok(tostring(n))
  end)

  -- Skip a child that has not finished: an impossible dependency ends it (and its running attempt).
  local function skip_child(k, core, now)
    local attempt_state = core.attempt_state
    if attempt_state == 'running_attempt' or attempt_state == 'attempt_interrupted' then
      redis.call('HSET', k.attempt, 'attempt_state', 'ended_cancelled', 'ended_at', now,
        'failure_reason', 'dependency_impossible')
      ff_close_stream_meta(k.stream_meta, now, 'dependency_impossible', false)
      attempt_state = 'attempt_terminal'
    elseif not ff_empty(attempt_state) and attempt_state ~= 'none' then
      attempt_state = 'none'
    end
    -- Lease fields and lease indexes are deliberately left as they are (upstream behaviour).
    local fields = {
      lifecycle_phase = 'terminal', ownership_state = 'unowned', eligibility_state = 'not_applicable',
      blocking_reason = 'none', blocking_detail = '', terminal_outcome = 'skipped', public_state = 'skipped',
      completed_at = now, last_transition_at = now, last_mutation_at = now,
    }
    if attempt_state then fields.attempt_state = attempt_state end
    ff_hset(k.core, fields)
    redis.call('ZREM', k.blocked, core.execution_id)
    redis.call('ZADD', k.terminal, now, core.execution_id)
  end

  local CORE_FIELDS = { 'execution_id', 'lifecycle_phase', 'ownership_state', 'eligibility_state',
    'terminal_outcome', 'attempt_state', 'priority', 'created_at' }

  -- An any_of / quorum(k) group (v0.13): every resolved edge counts as succeeded, failed or skipped; the
  -- group fires once — satisfied at k successes (the child becomes eligible), impossible when too few
  -- edges are left to reach k (the child is skipped). Later edges only count. With cancel_remaining, the
  -- firing lists the upstreams still running and queues the group for the sibling-cancel dispatcher.
  local function resolve_edge_group(k, g, dep, edge_id, outcome, now, flow_id, down)
    if tonumber(now) == nil then
      error('ff_resolve_dependency: now_ms must be a number, got: ' .. tostring(now))
    end
    local bucket = outcome == 'success' and 'succeeded' or outcome == 'skipped' and 'skipped' or 'failed'
    redis.call('HSET', k.dep, 'state', bucket == 'succeeded' and 'satisfied' or 'impossible',
      'last_resolved_at', now)
    redis.call('SREM', k.unresolved, edge_id)
    -- deps:meta keeps counting unresolved edges; the group record decides.
    redis.call('HINCRBY', k.meta, 'unsatisfied_required_count', -1)
    redis.call('HSET', k.meta, 'last_dependency_update_at', now)
    redis.call('HINCRBY', k.group, bucket, 1)
    local c = ff_hmget(k.group, { 'n', 'succeeded', 'failed', 'skipped', 'group_state', 'on_satisfied', 'k' })
    local n, ok_n = tonumber(c.n) or 0, tonumber(c.succeeded) or 0
    local bad = (tonumber(c.failed) or 0) + (tonumber(c.skipped) or 0)
    if ok_n + bad > n then
      return ff_err('invariant_violation', 'edgegroup counters exceed n: ' .. (ok_n + bad) .. '/' .. n)
    end
    if c.group_state == 'satisfied' or c.group_state == 'impossible' or c.group_state == 'cancelled' then
      return ff_ok('already_fired', '')
    end
    local need = 1
    if g.policy_variant == 'quorum' then need = math.max(tonumber(c.k) or 1, 1) end
    local state = 'pending'
    if ok_n >= need then state = 'satisfied' elseif bad > n - need then state = 'impossible' end
    if state == 'pending' then return ff_ok('pending', '') end

    redis.call('HSET', k.group, 'group_state', state)
    if state == 'satisfied' then redis.call('HSET', k.group, 'satisfied_at', now) end
    if c.on_satisfied == 'cancel_remaining' then
      local tag, running = ff_tag_of(k.group), {}
      if k.incoming and not ff_empty(flow_id) then
        for _, e in ipairs(redis.call('SMEMBERS', k.incoming)) do
          local up = redis.call('HGET', ff_key.flow(tag, flow_id, 'edge', e), 'upstream_execution_id')
          if not ff_empty(up) then
            local phase = redis.call('HGET', ff_key.exec(tag, up, 'core'), 'lifecycle_phase')
            if not ff_empty(phase) and phase ~= 'terminal' then running[#running + 1] = up end
          end
        end
      end
      redis.call('HSET', k.group, 'cancel_siblings_pending_flag', 'true',
        'cancel_siblings_reason', state == 'satisfied' and 'sibling_quorum_satisfied' or 'sibling_quorum_impossible',
        'cancel_siblings_pending_members', table.concat(running, '|'))
      -- Queued even with nobody to cancel: the dispatcher's drain is what clears the flag.
      if k.pending_groups and not ff_empty(flow_id) and not ff_empty(down) then
        redis.call('SADD', k.pending_groups, flow_id .. '|' .. down)
      end
    end

    local core = ff_hmget(k.core, CORE_FIELDS)
    if not core then return ff_ok(state, '') end
    if state == 'satisfied' then
      local injected = ''
      if not ff_empty(dep.data_passing_ref) and bucket == 'succeeded' and core.terminal_outcome == 'none' then
        if redis.call('COPY', k.result, k.payload, 'REPLACE') == 1 then injected = 'data_injected' end
      end
      if core.lifecycle_phase == 'runnable' and core.ownership_state == 'unowned'
          and core.terminal_outcome == 'none' and core.eligibility_state == 'blocked_by_dependencies' then
        ff_release_dependent(k, core, now)
      end
      return ff_ok('satisfied', injected)
    end
    if core.terminal_outcome ~= 'none' then return ff_ok('impossible', '') end
    skip_child(k, core, now)
    return ff_ok('impossible', 'child_skipped')
  end

  redis.register_function('ff_resolve_dependency', function(keys, args)
    local k = {
      core = keys[1], meta = keys[2], unresolved = keys[3], dep = keys[4], eligible = keys[5], terminal = keys[6],
      blocked = keys[7], attempt = keys[8], stream_meta = keys[9], payload = keys[10], result = keys[11],
      -- v0.13 shape only (14 KEYS / 5 ARGV)
      group = keys[12], incoming = keys[13], pending_groups = keys[14],
    }
    local edge_id, outcome, now = args[1], args[2], args[3]

    local dep = ff_hmget(k.dep, { 'state', 'data_passing_ref' })
    if not dep then return ff_err('invalid_dependency') end
    if dep.state == 'satisfied' or dep.state == 'impossible' then return ff_ok('already_resolved') end

    -- An upstream caller may pass "" for the v0.13 keys it knows it does not need.
    if ff_empty(k.group) then k.group = nil end
    if ff_empty(k.incoming) then k.incoming = nil end
    if ff_empty(k.pending_groups) then k.pending_groups = nil end
    local g = k.group and ff_hmget(k.group, { 'policy_variant' })
    if g and (g.policy_variant == 'any_of' or g.policy_variant == 'quorum') then
      return resolve_edge_group(k, g, dep, edge_id, outcome, now, args[4], args[5])
    end

    if outcome == 'success' then
      local injected = ff_satisfy_dependency(k, dep, edge_id, now)
      return ff_ok('satisfied', injected)
    end

    local core = ff_hmget(k.core, CORE_FIELDS)

    -- Any non-success upstream outcome makes the edge impossible and skips a live child.
    local skip = core ~= nil and core.terminal_outcome == 'none'
    if skip and tonumber(now) == nil then
      -- now_ms becomes a ZSET score below; fail before the first write rather than half-way.
      error('ff_resolve_dependency: now_ms must be a number, got: ' .. tostring(now))
    end
    redis.call('HSET', k.dep, 'state', 'impossible', 'last_resolved_at', now)
    redis.call('SREM', k.unresolved, edge_id)
    redis.call('HINCRBY', k.meta, 'unsatisfied_required_count', -1)
    redis.call('HINCRBY', k.meta, 'impossible_required_count', 1)
    redis.call('HSET', k.meta, 'last_dependency_update_at', now)
    if g then
      -- all_of record (v0.13): the first impossible edge decides the group.
      redis.call('HINCRBY', k.group, 'failed', 1)
      redis.call('HSET', k.group, 'group_state', 'impossible')
    end
    if not skip then return ff_ok('impossible', '') end
    skip_child(k, core, now)
    return ff_ok('impossible', 'child_skipped')
  end)

  redis.register_function('ff_evaluate_flow_eligibility', function(keys, args)
    local core_key, meta_key = keys[1], keys[2]

    local core = ff_hmget(core_key, { 'lifecycle_phase', 'ownership_state', 'terminal_outcome' })
    if not core then return ff_ok('not_found') end
    if core.lifecycle_phase ~= 'runnable' then return ff_ok('not_runnable') end
    if core.ownership_state ~= 'unowned' then return ff_ok('owned') end
    if core.terminal_outcome ~= 'none' then return ff_ok('terminal') end
    -- A missing meta hash reads as zero counts: eligible either way.
    local counts = redis.call('HMGET', meta_key, 'impossible_required_count', 'unsatisfied_required_count')
    if (tonumber(counts[1]) or 0) > 0 then return ff_ok('impossible') end
    if (tonumber(counts[2]) or 0) > 0 then return ff_ok('blocked_by_dependencies') end
    return ff_ok('eligible')
  end)

  redis.register_function('ff_promote_blocked_to_eligible', function(keys, args)
    local core_key, blocked_key, eligible_key, meta_key, unresolved_key = keys[1], keys[2], keys[3], keys[4], keys[5]
    local eid, now = args[1], args[2]

    local core = ff_hmget(core_key, { 'lifecycle_phase', 'eligibility_state', 'terminal_outcome',
      'attempt_state', 'priority', 'created_at' })
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'runnable' then return ff_err('not_runnable') end
    if core.eligibility_state ~= 'blocked_by_dependencies' then return ff_err('not_blocked_by_deps') end
    if core.terminal_outcome ~= 'none' then return ff_err('terminal') end
    local unsatisfied = tonumber(redis.call('HGET', meta_key, 'unsatisfied_required_count')) or 0
    local unresolved = redis.call('SCARD', unresolved_key)
    if unsatisfied > 0 or unresolved > 0 then
      return ff_err('deps_not_satisfied', tostring(unsatisfied), tostring(unresolved))
    end

    redis.call('HSET', core_key, 'eligibility_state', 'eligible_now', 'blocking_reason', 'waiting_for_worker',
      'blocking_detail', '', 'attempt_state', ff_pending_attempt_state(core.attempt_state),
      'public_state', 'waiting', 'last_transition_at', now, 'last_mutation_at', now)
    redis.call('ZREM', blocked_key, eid)
    redis.call('ZADD', eligible_key, ff_eligible_score(core.priority, core.created_at), eid)
    return ff_ok()
  end)

  redis.register_function('ff_replay_execution', function(keys, args)
    local core_key, terminal_key, eligible_key, history_key = keys[1], keys[2], keys[3], keys[4]
    local blocked_key, meta_key, unresolved_key = keys[5], keys[6], keys[7]
    local eid = args[1]

    local core = ff_hmget(core_key, { 'lifecycle_phase', 'terminal_outcome', 'flow_id', 'replay_count',
      'priority', 'created_at' })
    if not core then return ff_err('execution_not_found') end
    if core.lifecycle_phase ~= 'terminal' then return ff_err('execution_not_terminal') end

    local max_replays = 10
    local policy = ff_json(redis.call('GET', ff_key.of_core(core_key, 'policy')))
    if type(policy) == 'table' then max_replays = tonumber(policy.max_replay_count) or 10 end
    local replays = tonumber(core.replay_count) or 0
    if replays >= max_replays then return ff_err('max_replays_exhausted') end
    replays = replays + 1

    local now = ff_now()
    local skipped_member = core.terminal_outcome == 'skipped' and not ff_empty(core.flow_id)
    if not skipped_member then
      redis.call('HSET', core_key, 'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
        'eligibility_state', 'eligible_now', 'blocking_reason', 'waiting_for_worker', 'blocking_detail', '',
        'terminal_outcome', 'none', 'attempt_state', 'pending_replay_attempt', 'public_state', 'waiting',
        'pending_replay_attempt', '1', 'replay_count', replays, 'completed_at', '',
        'last_transition_at', now, 'last_mutation_at', now)
      redis.call('ZREM', terminal_key, eid)
      redis.call('ZADD', eligible_key, ff_eligible_score(core.priority, core.created_at), eid)
      ff_history(history_key, 1000, 'replay_initiated',
        { 'replay_count', replays, 'replay_type', 'normal', 'ts', now })
      return ff_ok('0')
    end

    -- Skipped flow member: reopen its impossible edges and wait for the upstreams again.
    local edge_count = #args - 2
    if not (blocked_key and meta_key and unresolved_key) or #keys < 7 + edge_count then
      error('ff_replay_execution: a skipped flow member needs KEYS 5-7 and one dep key per edge id')
    end
    local unsatisfied, satisfied = 0, 0
    for j = 1, edge_count do
      local dep_key = keys[7 + j]
      local state = redis.call('HGET', dep_key, 'state')
      if state == 'impossible' then
        redis.call('HSET', dep_key, 'state', 'unsatisfied', 'last_resolved_at', '')
        redis.call('SADD', unresolved_key, args[2 + j])
        unsatisfied = unsatisfied + 1
      elseif state == 'unsatisfied' then
        unsatisfied = unsatisfied + 1
      elseif state == 'satisfied' then
        satisfied = satisfied + 1
      end
    end
    -- Its v0.13 edge-group record (ours to touch: none exists in v0.2.0 data) is reopened with the edges, so
    -- the group decides the replayed member afresh instead of staying fired.
    local group_key = ff_key.flow(ff_tag_of(core_key), core.flow_id, 'edgegroup', eid)
    if redis.call('EXISTS', group_key) == 1 then
      redis.call('HSET', group_key, 'succeeded', satisfied, 'failed', '0', 'skipped', '0', 'group_state', 'pending')
      redis.call('HDEL', group_key, 'satisfied_at')
    end
    redis.call('HSET', meta_key, 'unsatisfied_required_count', unsatisfied, 'impossible_required_count', '0',
      'last_dependency_update_at', now)
    redis.call('HSET', core_key, 'lifecycle_phase', 'runnable', 'ownership_state', 'unowned',
      'eligibility_state', 'blocked_by_dependencies', 'blocking_reason', 'waiting_for_children',
      'blocking_detail', unsatisfied .. ' dep(s) unsatisfied after replay',
      'terminal_outcome', 'none', 'attempt_state', 'pending_replay_attempt', 'public_state', 'waiting_children',
      'pending_replay_attempt', '1', 'replay_count', replays, 'completed_at', '',
      'last_transition_at', now, 'last_mutation_at', now)
    redis.call('ZREM', terminal_key, eid)
    redis.call('ZADD', blocked_key, core.created_at or 0, eid)
    ff_history(history_key, 1000, 'replay_initiated',
      { 'replay_count', replays, 'replay_type', 'skipped_flow_member', 'ts', now })
    return ff_ok(tostring(unsatisfied))
  end)
end
