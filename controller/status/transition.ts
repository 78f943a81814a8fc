/**
 * The one way a status changes phase. A run's phase and the conditions that describe it (`Ready`:
 * the current attempt is running; `Scheduled`: a backend was chosen for it) are set together here,
 * so they cannot disagree: `Running` is `Ready=True`, no other phase is, and a `Pending` run has
 * no backend chosen. Every other condition (Valid, Stale, Lost, Checkpointed, …) says something
 * the phase does not, and is set on its own with `setCondition`.
 */
import {
  ConditionType,
  Phase,
  setCondition,
  type Condition,
  type OwnerStatusCore,
  type RunStatus,
} from './types.js';

/** A condition as a transition sets it: its time is the transition's. */
export type ConditionChange = Omit<Condition, 'lastTransitionTime'>;

/** Where a run goes, why, and the conditions that change with it. */
export interface RunTransition {
  phase: Phase;
  reason: string;
  message: string;
  /**
   * Set in this order after the phase (a changed condition moves to the end of the list, so the
   * order is part of what is written). `Ready` and `Scheduled` may be given to say why they are
   * False; left out, they follow the phase (see `transition`).
   */
  conditions?: readonly ConditionChange[];
}

/**
 * Moves a run to `t.phase` with its reason and message, and sets `t.conditions`; then makes the
 * phase's conditions hold (`impliedBy`). Throws when `t.conditions` contradict the phase (a bug in
 * the caller, never the user's input).
 */
export function transition(st: RunStatus, t: RunTransition, now: string): void {
  const given = t.conditions ?? [];
  const contradiction = given.find(
    (c) =>
      (c.type === ConditionType.Ready && (c.status === 'True') !== (t.phase === Phase.Running)) ||
      (c.type === ConditionType.Scheduled && c.status === 'True' && t.phase === Phase.Pending),
  );
  if (contradiction)
    throw new Error(`a ${t.phase} run cannot have ${contradiction.type}=${contradiction.status}`);
  setPhase(st, t.phase, t.reason, t.message);
  let conditions = st.conditions;
  for (const c of given) conditions = setCondition(conditions, c, now);
  for (const c of impliedBy(t, conditions)) conditions = setCondition(conditions, c, now);
  st.conditions = conditions;
}

/**
 * What the phase says of the conditions `t` left unsaid, given the list as it stands: `Running`
 * is `Ready=True` (reason `Running`); any other phase turns a `Ready` still True to False with the
 * transition's reason (a run suspended, deleted or restarted while it ran: its attempt did not
 * end through the planner, which says why itself); a `Pending` run whose `Scheduled` is still True
 * gets `Scheduled=False` with the transition's reason and message.
 */
function impliedBy(t: RunTransition, list: readonly Condition[]): ConditionChange[] {
  const unsaid = (type: string) => !t.conditions?.some((c) => c.type === type);
  const out: ConditionChange[] = [];
  if (unsaid(ConditionType.Ready)) {
    if (t.phase === Phase.Running)
      out.push({ type: ConditionType.Ready, status: 'True', reason: 'Running', message: '' });
    else if (isTrue(list, ConditionType.Ready))
      out.push({ type: ConditionType.Ready, status: 'False', reason: t.reason, message: '' });
  }
  if (t.phase === Phase.Pending && unsaid(ConditionType.Scheduled) && isTrue(list, ConditionType.Scheduled))
    out.push({ type: ConditionType.Scheduled, status: 'False', reason: t.reason, message: t.message });
  return out;
}

/**
 * Sets a DAG's or a Sweep's phase with the reason and message that explain it. An owner's phase
 * is its children's, summed up: no condition follows it.
 */
export function setOwnerPhase(st: OwnerStatusCore, phase: Phase, reason: string, message: string): void {
  setPhase(st, phase, reason, message);
}

// In this order: the status file's keys keep the order they were first written in.
function setPhase(st: RunStatus | OwnerStatusCore, phase: Phase, reason: string, message: string): void {
  st.phase = phase;
  st.reason = reason;
  st.message = message;
}

const isTrue = (list: readonly Condition[], type: string) =>
  list.some((c) => c.type === type && c.status === 'True');
