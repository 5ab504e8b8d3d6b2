"""Budget pools: each pool's share of the available tokens, what it uses, lends and borrows.
Every formula is here once; the truncation state and the pool nodes call these."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

BUFFER = "buffer"
RESERVE = "reserve"
NOT_POOLS = (BUFFER, RESERVE)


def pool_shares(total: int, weights: Mapping[str, float], buffer: str = BUFFER) -> dict[str, int]:
    """Each pool's share of ``total`` tokens: its weight over the sum of weights, rounded down;
    the rounding remainder goes to the ``buffer`` pool when there is one."""
    weight_sum = sum(max(0.0, float(w)) for w in weights.values())
    if weight_sum <= 0:
        return {name: 0 for name in weights}
    shares = {name: int(total * max(0.0, float(w)) / weight_sum) for name, w in weights.items()}
    if buffer in shares:
        shares[buffer] += total - sum(shares.values())
    return shares


def with_code_pool(weights: Mapping[str, float], share: float, pool: str = "code") -> dict[str, float]:
    """``weights`` with the ``pool`` taking ``share`` of the total and the others splitting the
    rest in their proportions (unchanged when ``share`` is 0)."""
    if share <= 0:
        return dict(weights)
    out = {name: float(w) * (1.0 - share) for name, w in weights.items()}
    out[pool] = share
    return out


def pool_use(sections: Iterable, tokens: Mapping[str, int], overhead: int = 0) -> dict[str, int]:
    """Tokens each pool uses: its sections' ``tokens``; the template ``overhead`` counts in the
    system pool."""
    use: dict[str, int] = {"system": overhead}
    for section in sections:
        use[section.pool] = use.get(section.pool, 0) + tokens[section.key]
    return use


def pool_debts(shares: Mapping[str, int], use: Mapping[str, int]) -> dict[str, int]:
    """The pools using more than their share, and by how much (their debt)."""
    return {p: use[p] - s for p, s in shares.items() if p in use and use[p] > s and p not in NOT_POOLS}


def pool_accounts(shares: Mapping[str, int], uses: Mapping[str, int], buffer: str = BUFFER) -> dict[str, dict]:
    """Each pool's share, use, loan (unused share given to the buffer) and debt (tokens borrowed
    from the buffer), and the buffer's share and remaining tokens (negative: overspent)."""
    debts = pool_debts(shares, uses)
    accounts: dict[str, dict] = {}
    for name, share in shares.items():
        if name == buffer:
            continue
        use = int(uses.get(name, 0))
        accounts[name] = {"share": share, "use": use, "loan": max(0, share - use), "debt": debts.get(name, 0)}
    stray = sum(int(v) for k, v in uses.items() if k not in shares or k == buffer)
    buffer_share = int(shares.get(buffer, 0))
    remaining = buffer_share - stray + sum(a["loan"] - a["debt"] for a in accounts.values())
    accounts[buffer] = {"share": buffer_share, "use": stray, "remaining": remaining}
    return accounts


def pool_limit(accounts: Mapping[str, Mapping], pool: str, buffer: str = BUFFER) -> int:
    """Tokens ``pool`` may use: its share plus what the buffer holds without this pool's own
    use (its share, what the other pools lend, less what they borrow)."""
    own = accounts[pool]
    rest = accounts[buffer]["remaining"] - own["loan"] + own["debt"]
    return own["share"] + max(0, rest)


def cut_order(items: Sequence[tuple[str, int]], rank: Mapping[str, int] | None = None) -> list[int]:
    """The order in which to cut ``items`` (container, priority): containers by ``rank``
    (lower first, absent 0), then lowest priority first, ties in input order. Priorities are
    scoped by container, as pools scope sections (pools over their share rank first)."""
    ranks = rank or {}
    return sorted(range(len(items)), key=lambda i: (ranks.get(items[i][0], 0), items[i][1], i))
