"""The barrier protocol of a schedule, checked without a GPU: every interleaving of its roles on small instances.

Each role is one sequential program (a role's warps act as one: their `sync` is the compiler's business, and one
thread arrives for all), unrolled over a program's tiles and k-steps exactly as the lowering's loops run it. The
hardware is modelled where the protocol depends on it:
- an mbarrier counts completed phases; `wait(parity)` passes while the phase of that parity is the last completed
  one or older (so a fresh barrier passes a wait for parity 1, and a parity cannot tell two laps apart); a phase
  completes when its arrivals reach the barrier's count and the bytes it expects have landed;
- a `load` arrives on the slot's barrier at once (expect-tx) and its bytes land at any later moment;
- an MMA reads its slot from its issue until `mma_wait` retires it (it may finish earlier, but nothing says so).

Every reachable state is explored (memoised depth-first search), on instances whose tiles and k-steps make the
ring wrap more than once (and each alternating math role get two tiles or more). Found:
- a role blocked for ever (a deadlock): a wait no other role arrives at, a phase that never completes (a missing
  arrive, a wrong parity, a count the arrivals never reach);
- a slot read before its lap's bytes have landed (a wait that passed on an older phase: the wrong parity, or a
  parity aliasing a lap two away);
- a slot overwritten while an MMA still reads it or before its data was read (released too early);
- arrivals beyond a barrier's count within one phase.
Each `Finding` names the schedule field to change.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import RING_BARRIERS, Arrive, Load, Mma, MmaWait, Schedule, Wait


@dataclass(frozen=True)
class Finding:
    """A protocol error: the field to change and what goes wrong (with the instance that shows it)."""

    field: str
    message: str


@dataclass(frozen=True)
class _Step:
    path: str
    op: object
    role: int
    pos: int        # the role's ring position counter when the op runs
    tile: int       # the role's tile count (phase counter of barrier arrays)
    ks: int         # k-step within the tile (-1 outside the k-loop)


def _programs(s: Schedule, tiles: int, k_steps: int) -> list[list[_Step]]:
    math = s.math_roles
    out = []
    for ri, role in enumerate(s.roles):
        mine = list(range(tiles))
        pos, skip = 0, 0
        if role.kind == "math" and s.issue.tiles == "alternate":
            c, n = math.index(role), len(math)
            mine = list(range(c, tiles, n))
            pos, skip = c * k_steps, (n - 1) * k_steps
        prog: list[_Step] = []
        for j, _tile in enumerate(mine):
            for i, op in enumerate(role.tile_begin):
                prog.append(_Step(f"roles[{ri}].tile_begin[{i}]", op, ri, pos, j, -1))
            for ks in range(k_steps):
                for i, op in enumerate(role.k_step):
                    prog.append(_Step(f"roles[{ri}].k_step[{i}]", op, ri, pos, j, ks))
                pos += 1
            for i, op in enumerate(role.tile_end):
                prog.append(_Step(f"roles[{ri}].tile_end[{i}]", op, ri, pos, j, -1))
            pos += skip
        out.append(prog)
    return out


class _Model:
    def __init__(self, s: Schedule, tiles: int, k_steps: int):
        self.s = s
        self.S = s.ring.stages
        self.accs = s.issue.accumulators
        self.progs = _programs(s, tiles, k_steps)
        self.instance = f"{tiles} tiles of {k_steps} k-step(s) on a {self.S}-slot ring"
        # barrier instances: (name, index) -> count
        self.bars: dict[tuple[str, int], int] = {}
        for i in range(self.S):
            self.bars[("ready", i)] = s.ring.ready_count
            self.bars[("empty", i)] = s.ring.empty_count
        for b in s.barriers:
            for i in range(b.size):
                self.bars[(b.name, i)] = b.count
        self.bar_ids = {k: n for n, k in enumerate(self.bars)}
        load = next((o.barrier for o in s.loader.k_step if isinstance(o, Load)), "ready")
        self.load_bar = [self.bar_ids[(load, i)] for i in range(self.S)]   # where each slot's bytes land
        self.counts = [self.bars[k] for k in self.bars]
        self.count_field = {k: (f"ring.{k[0]}_count" if k[0] in RING_BARRIERS
                                else f"barriers[{[b.name for b in s.barriers].index(k[0])}].count") for k in self.bars}

    def bar_of(self, step: _Step) -> int:
        op = step.op
        if op.barrier in RING_BARRIERS:
            pos = step.pos - 1 if isinstance(op, Arrive) and op.slot == "previous" else step.pos
            return self.bar_ids[(op.barrier, pos % self.S)]
        return self.bar_ids[(op.barrier, op.index)]

    def parity(self, step: _Step) -> int:
        op = step.op
        phase = (step.pos // self.S) & 1 if op.barrier in RING_BARRIERS else step.tile & 1
        return phase if op.parity == "phase" else phase ^ 1


# state: (pcs, bars, slots, mmas, blame)
#   bars[i]  = (completed, arrivals, tx_pending)
#   slots[i] = (data_lap, inflight_lap, readers, consumed_lap)
#   mmas[r]  = tuple of in-flight (slot, lap)
#   blame[i] = path of the op that completed barrier i's last phase ('' none)

def _arrive(m: _Model, bars: list, blame: list, b: int, n: int, path: str) -> str | None:
    done, arr, tx = bars[b]
    arr += n
    if arr > m.counts[b]:
        name = list(m.bars)[b]
        return f"{m.count_field[name]}|{path} arrives on {name[0]}[{name[1]}] beyond its count {m.counts[b]} in one phase"
    if arr == m.counts[b] and tx == 0:
        bars[b] = (done + 1, 0, 0)
        blame[b] = path
    else:
        bars[b] = (done, arr, tx)
    return None


def _explore(m: _Model, tiles_k: tuple[int, int], attribute: bool = True) -> Finding | None:
    """The first protocol error on any interleaving (None: none). With `attribute`, a deadlock is blamed on the
    wait whose other parity runs the instance through, where there is one."""
    R = len(m.progs)
    start = (tuple([0] * R), tuple((0, 0, 0) for _ in m.counts), tuple((None, None, 0, None) for _ in range(m.S)),
             tuple(() for _ in range(R)), tuple("" for _ in m.counts))
    seen = {start}
    stack = [start]
    while stack:
        state = stack.pop()
        pcs, bars, slots, mmas, blame = state
        succ = []
        blocked = []
        for r in range(R):
            if pcs[r] >= len(m.progs[r]):
                continue
            step = m.progs[r][pcs[r]]
            got = _step(m, state, r, step)
            if isinstance(got, Finding):
                return got
            if got is None:
                blocked.append(step)
            else:
                succ.append(got)
        for i, (data, inflight, readers, consumed) in enumerate(slots):   # bytes landing
            if inflight is not None:
                nb, ns, nbl = list(bars), list(slots), list(blame)
                ns[i] = (inflight, None, readers, consumed)
                b = m.load_bar[i]
                done, arr, tx = nb[b]
                tx -= 1
                if arr == m.counts[b] and tx == 0:
                    nb[b] = (done + 1, 0, 0)
                else:
                    nb[b] = (done, arr, tx)
                succ.append((pcs, tuple(nb), tuple(ns), mmas, tuple(nbl)))
        if not succ and blocked:
            return _deadlock(m, blocked, tiles_k) if attribute else Finding(blocked[0].path, "deadlock")
        for nxt in succ:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return None


def _flipped(s: Schedule, path: str) -> Schedule:
    """`s` with the parity of the wait at `path` (e.g. 'roles[1].k_step[0]') flipped."""
    data = s.model_dump()
    role, rest = path.split("].", 1)
    sec, idx = rest.rstrip("]").split("[")
    op = data["roles"][int(role[len("roles["):])][sec][int(idx)]
    op["parity"] = "phase" if op["parity"] == "phase^1" else "phase^1"
    return Schedule.model_validate(data)


def _deadlock(m: _Model, blocked: list[_Step], tiles_k: tuple[int, int]) -> Finding:
    # the wait to blame is one whose other parity makes the instance run through (tried in role order)
    for b in blocked:
        if _explore(_Model(_flipped(m.s, b.path), *tiles_k), tiles_k, attribute=False) is None:
            return Finding(f"{b.path}.parity", f"waits for a phase of {b.op.barrier}"
                                               f"{'' if b.op.index is None else f'[{b.op.index}]'} that never "
                                               f"completes: the other parity runs through (deadlock; {m.instance})")
    step = blocked[0]
    op = step.op
    name = op.barrier + (f"[{op.index}]" if op.index is not None else "")
    others = [p for p, o in m.s.op_paths() if isinstance(o, (Arrive, Load)) and o.barrier == op.barrier
              and getattr(o, "index", None) == op.index and not p.startswith(f"roles[{step.role}].")]
    who = ", ".join(f"{m.s.roles[b.role].name} at {b.path}" for b in blocked)
    if not others:
        return Finding(step.path, f"waits on {name}, at which no other role arrives (deadlock: {who}; "
                                  f"{m.instance})")
    return Finding(f"{step.path}.parity", f"waits for a phase of {name} that never completes: a missing arrive, a "
                                          f"wrong parity or count (deadlock: {who}; {m.instance})")


def _step(m: _Model, state, r: int, step: _Step):
    """The state after role r's next op, None when it is blocked, a Finding on a protocol error."""
    pcs, bars, slots, mmas, blame = state
    op = step.op
    nb, ns, nm, nbl = list(bars), list(slots), list(mmas), list(blame)
    slot, lap = step.pos % m.S, step.pos // m.S
    if isinstance(op, Wait):
        b = m.bar_of(step)
        if bars[b][0] % 2 == m.parity(step):
            return None
    elif isinstance(op, Arrive):
        if not (op.skip_first and step.ks == 0):
            err = _arrive(m, nb, nbl, m.bar_of(step), op.count, step.path)
            if err:
                field, msg = err.split("|", 1)
                return Finding(field, f"{msg} ({m.instance})")
    elif isinstance(op, Load):
        data, inflight, readers, consumed = slots[slot]
        released = blame[m.bar_ids[("empty", slot)]] or "the ring's empty barriers"
        if readers:
            return Finding(released, f"releases slot {slot} while an MMA still reads it: the loader overwrites it "
                                     f"(lap {lap}) too early ({m.instance})")
        if inflight is not None or (data is not None and consumed != data):
            return Finding(released, f"releases slot {slot} before its lap {data if data is not None else inflight} "
                                     f"was read: the loader overwrites it with lap {lap} ({m.instance})")
        ns[slot] = (data, lap, readers, consumed)
        b = m.load_bar[slot]
        done, arr, tx = nb[b]
        nb[b] = (done, arr, tx + 1)
        err = _arrive(m, nb, nbl, b, 1, step.path)
        if err:
            field, msg = err.split("|", 1)
            return Finding(field, f"{msg} ({m.instance})")
    elif isinstance(op, Mma):
        data, inflight, readers, consumed = slots[slot]
        if data != lap or inflight is not None:
            waits = [f"roles[{r}].k_step[{i}].parity" for i, o in enumerate(m.s.roles[r].k_step)
                     if isinstance(o, Wait) and o.barrier in RING_BARRIERS]
            return Finding(waits[0] if waits else f"roles[{r}].k_step",
                           f"the MMA reads slot {slot} for lap {lap} before those bytes have landed (it holds "
                           f"{'nothing' if data is None else f'lap {data}'}): the wait passed on an older phase "
                           f"({m.instance})")
        ns[slot] = (data, inflight, readers + m.accs, lap)
        nm[r] = mmas[r] + ((slot, lap),) * m.accs
    elif isinstance(op, MmaWait):
        fly = list(mmas[r])
        while len(fly) > op.pending:
            s2, _ = fly.pop(0)
            d, i2, rd, c2 = ns[s2]
            ns[s2] = (d, i2, rd - 1, c2)
        nm[r] = tuple(fly)
    new_pcs = list(pcs)
    new_pcs[r] += 1
    return (tuple(new_pcs), tuple(nb), tuple(ns), tuple(nm), tuple(nbl))


def instances(s: Schedule) -> list[tuple[int, int]]:
    """(tiles, k_steps) checked: one k-step a tile and a k-loop one longer than the ring, with two tiles or more per
    math role, so the ring wraps at least twice."""
    per = len(s.math_roles) if s.issue.tiles == "alternate" else 1
    tiles = 2 * per
    return [(max(tiles, 2 * s.ring.stages), 1), (tiles, s.ring.stages + 1)]


def _arrivals_per_tile(role, barrier: str, k_steps: int) -> int:
    """Arrivals one tile of `role` makes on the ring barrier `barrier` (a load counts one)."""
    n = 0
    for sec, _, op in role.ops():
        if isinstance(op, (Arrive, Load)) and op.barrier == barrier:
            times = (k_steps - (1 if isinstance(op, Arrive) and op.skip_first else 0)) if sec == "k_step" else 1
            n += times * (op.count if isinstance(op, Arrive) else 1)
    return n


def check_balance(s: Schedule) -> list[Finding]:
    """Arrivals against phases, counted without running anything: each ring position must complete one phase of
    its slot's `ready` and `empty` barriers (arrivals a tile = k-steps x count, for one k-step and for three), and
    each barrier array must receive count x the waits on it."""
    out = []
    for barrier in ("ready", "empty"):
        count = s.ring.ready_count if barrier == "ready" else s.ring.empty_count
        for i, role in enumerate(s.roles):
            got = {k: _arrivals_per_tile(role, barrier, k) for k in (1, 3)}
            if not any(got.values()):
                continue
            if all(got[k] == k for k in got) and count != 1:
                out.append(Finding(f"ring.{barrier}_count", f"a phase of a slot's {barrier} barrier needs {count} "
                                                            f"arrivals, but each ring position gets one"))
            elif any(got[k] != k * count for k in got):
                section = "k_step" if got[3] - got[1] != 2 * count else "tile_end"
                out.append(Finding(f"roles[{i}].{section}", f"{role.name} completes {got[1]} and {got[3]} phases of "
                                                             f"{barrier} in tiles of 1 and 3 k-steps (one a ring "
                                                             f"position: a missing or extra arrive)"))
    for bi, b in enumerate(s.barriers):
        for index in range(b.size):
            arrives = sum(o.count for _, o in s.op_paths() if isinstance(o, Arrive) and o.barrier == b.name
                          and o.index == index)
            waits = sum(1 for _, o in s.op_paths() if isinstance(o, Wait) and o.barrier == b.name and o.index == index)
            if waits and arrives != waits * b.count:
                out.append(Finding(f"barriers[{bi}].count", f"{b.name}[{index}] gets {arrives} arrival(s) a round "
                                                            f"for {waits} wait(s) of {b.count} arrival(s) each"))
    return out


def check_protocol(s: Schedule) -> list[Finding]:
    """The protocol errors of `s` (empty: none on any interleaving of the instances checked)."""
    out = []
    for role_i, role in enumerate(s.roles):
        for path, op in [(p, o) for p, o in s.op_paths() if p.startswith(f"roles[{role_i}].")]:
            if isinstance(op, Wait):
                arrivers = [p for p, o in s.op_paths() if isinstance(o, (Arrive, Load)) and o.barrier == op.barrier
                            and getattr(o, "index", None) == op.index and not p.startswith(f"roles[{role_i}].")]
                if not arrivers:
                    out.append(Finding(path, f"{role.name} waits on {op.barrier}"
                                             f"{'' if op.index is None else f'[{op.index}]'}, at which no other role "
                                             f"arrives"))
    out += check_balance(s)
    if out:
        return out
    for tiles, k_steps in instances(s):
        found = _explore(_Model(s, tiles, k_steps), (tiles, k_steps))
        if found is not None:
            return [found]
    return []


__all__ = ["Finding", "check_balance", "check_protocol", "instances"]
