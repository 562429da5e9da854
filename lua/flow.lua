-- flow.lua — flows, DAG dependency edges, dependency resolution and replay (contract §5.39–§5.47).
--
-- Keys touched:
--   F:core (RW), F:members (RW), I:flow_index (W), F:edge:<e> (RW), F:out:<eid> (RW), F:in:<eid> (W),
--   E:core (RW), E:deps:meta (RW), E:deps:unresolved (RW), E:deps:all_edges (W), E:dep:<e> (RW),
--   E:payload (W, COPY target), upstream E:result (R, COPY source), A(i) (W), S(i):meta (W),
--   E:lease:history (W), E:policy (R, replay; derived from KEYS[1]),
--   L:eligible, L:terminal, L:blocked:dependencies (W).
--   Dynamic: F:out:<eid> and F:edge:<e> of the same flow during cycle detection (read only).
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
-- ff_resolve_dependency
--   KEYS[1] E:core (child) · KEYS[2] E:deps:meta · KEYS[3] E:deps:unresolved · KEYS[4] E:dep:<e>
--   KEYS[5] L:eligible · KEYS[6] L:terminal · KEYS[7] L:blocked:dependencies
--   KEYS[8] A(child current_attempt_index) · KEYS[9] S(same):meta · KEYS[10] E:payload (child)
--   KEYS[11] upstream E:result
--   ARGV[1] edge_id · ARGV[2] upstream_outcome (success → satisfied, else impossible)
--   ARGV[3] now_ms (caller now, verbatim; also the terminal ZSET score)
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

-- Attempt state a freshly eligible execution carries (empty / none → pending_first_attempt).
local function ff_pending_attempt_state(s)
  if ff_empty(s) or s == 'none' then return 'pending_first_attempt' end
  return s
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
  if not core then return '', false end
  local injected = ''
  if not ff_empty(dep.data_passing_ref) and core.terminal_outcome == 'none' then
    if redis.call('COPY', k.result, k.payload, 'REPLACE') == 1 then injected = 'data_injected' end
  end
  if remaining == 0 and core.lifecycle_phase == 'runnable' and core.ownership_state == 'unowned'
      and core.terminal_outcome == 'none' and core.eligibility_state == 'blocked_by_dependencies' then
    redis.call('HSET', k.core, 'eligibility_state', 'eligible_now',
      'blocking_reason', 'waiting_for_worker', 'blocking_detail', '',
      'attempt_state', ff_pending_attempt_state(core.attempt_state), 'public_state', 'waiting',
      'last_transition_at', now, 'last_mutation_at', now)
    redis.call('ZREM', k.blocked, core.execution_id)
    redis.call('ZADD', k.eligible, ff_eligible_score(core.priority, core.created_at), core.execution_id)
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
    local reason, policy = args[2], args[3]

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
    return reply
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
    local eligible_key, blocked_key, all_edges_key = keys[5], keys[6], keys[7]
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

  redis.register_function('ff_resolve_dependency', function(keys, args)
    local core_key, meta_key, unresolved_key, dep_key = keys[1], keys[2], keys[3], keys[4]
    local eligible_key, terminal_key, blocked_key = keys[5], keys[6], keys[7]
    local attempt_key, stream_meta_key, payload_key, result_key = keys[8], keys[9], keys[10], keys[11]
    local edge_id, outcome, now = args[1], args[2], args[3]

    local dep = ff_hmget(dep_key, { 'state', 'data_passing_ref' })
    if not dep then return ff_err('invalid_dependency') end
    if dep.state == 'satisfied' or dep.state == 'impossible' then return ff_ok('already_resolved') end

    if outcome == 'success' then
      local injected = ff_satisfy_dependency({
        core = core_key, meta = meta_key, unresolved = unresolved_key, dep = dep_key, eligible = eligible_key,
        blocked = blocked_key, payload = payload_key, result = result_key,
      }, dep, edge_id, now)
      return ff_ok('satisfied', injected)
    end

    local core = ff_hmget(core_key, { 'execution_id', 'lifecycle_phase', 'ownership_state',
      'eligibility_state', 'terminal_outcome', 'attempt_state', 'priority', 'created_at' })

    -- Any non-success upstream outcome makes the edge impossible and skips a live child.
    local skip = core ~= nil and core.terminal_outcome == 'none'
    if skip and tonumber(now) == nil then
      -- now_ms becomes a ZSET score below; fail before the first write rather than half-way.
      error('ff_resolve_dependency: now_ms must be a number, got: ' .. tostring(now))
    end
    redis.call('HSET', dep_key, 'state', 'impossible', 'last_resolved_at', now)
    redis.call('SREM', unresolved_key, edge_id)
    redis.call('HINCRBY', meta_key, 'unsatisfied_required_count', -1)
    redis.call('HINCRBY', meta_key, 'impossible_required_count', 1)
    redis.call('HSET', meta_key, 'last_dependency_update_at', now)
    if not skip then return ff_ok('impossible', '') end

    local attempt_state = core.attempt_state
    if attempt_state == 'running_attempt' or attempt_state == 'attempt_interrupted' then
      redis.call('HSET', attempt_key, 'attempt_state', 'ended_cancelled', 'ended_at', now,
        'failure_reason', 'dependency_impossible')
      ff_close_stream_meta(stream_meta_key, now, 'dependency_impossible', false)
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
    ff_hset(core_key, fields)
    redis.call('ZREM', blocked_key, core.execution_id)
    redis.call('ZADD', terminal_key, now, core.execution_id)
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
    local unsatisfied = 0
    for j = 1, edge_count do
      local dep_key = keys[7 + j]
      local state = redis.call('HGET', dep_key, 'state')
      if state == 'impossible' then
        redis.call('HSET', dep_key, 'state', 'unsatisfied', 'last_resolved_at', '')
        redis.call('SADD', unresolved_key, args[2 + j])
        unsatisfied = unsatisfied + 1
      elseif state == 'unsatisfied' then
        unsatisfied = unsatisfied + 1
      end
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
