"""The SQL fence: a statement is parsed in its database's own dialect (sqlglot), never pattern-matched,
and only one read-only SELECT over the attached tables gets through, with its rows capped. What runs is
the statement regenerated from the checked tree, so nothing the parser did not see (a comment hiding a
second statement, a quoting trick) reaches the database."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ragstack.errors import InvalidArgument

DIALECTS = ("sqlite", "postgres", "duckdb")
MAX_SQL_CHARS = 20_000  # parsing time grows with the text: a statement an analyst writes is far shorter


class SqlRefused(InvalidArgument):
    """The statement is not one read-only SELECT over the attached tables; it was never run."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"SQL refused: {reason}")
        self.reason = reason


# Any of these anywhere in the tree means the statement could write, change the session, or reach
# outside the database (files, programs, other databases).
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Command,
    exp.Pragma,
    exp.Attach,
    exp.Detach,
    exp.Copy,
    exp.Install,
    exp.Set,
    exp.Use,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Grant,
    exp.Revoke,
    exp.LoadData,
    exp.Analyze,
    exp.Into,
    exp.Lock,
    exp.Placeholder,
    exp.Parameter,
)

# A recursive CTE that builds strings doubles them each round: memory, not rows, runs out first.
_GROWING = (exp.DPipe, exp.Concat, exp.ConcatWs, exp.Replace, exp.GroupConcat)

# Functions sqlglot knows by type are computations (aggregates, strings, dates, math), except these:
# they read files or URLs, advance sequences, or tell who and where the database is.
_FORBIDDEN_FUNCS = re.compile(
    r"^(?:Read\w*|ToFile|NextValueFor|Seq\d|Uuid|Repeat|Space|Pad|Format\w*|SessionUser|ArrayAgg|"
    r"Generate\w*|ExplodingGenerateSeries|"
    r"Current(?!Date$|Time$|Timestamp$|Datetime$|TimestampLTZ$)\w*)$"
)

# Functions sqlglot does not type are refused unless listed here: every engine has its own file,
# network, sleep and admin functions (load_extension, pg_read_file, query_to_xml, read_text...), and a
# list of what analytics needs is shorter and safer than a list of what could hurt.
_ALLOWED_UNTYPED = frozenset(
    """
    julianday instr total ifnull iif nullif strftime date datetime time unixepoch
    substr replace ltrim rtrim char_length character_length octet_length initcap split_part left right
    reverse position strpos concat_ws to_char to_date to_number to_timestamp age date_part
    date_trunc make_date make_timestamp justify_days extract epoch dayname monthname dayofweek dayofyear
    weekofyear quarter strptime trunc floor ceil ceiling sign sqrt power pow ln log log10 log2 exp mod
    greatest least pi degrees radians sin cos tan asin acos atan atan2 round abs random width_bucket
    percentile_cont percentile_disc median mode string_agg group_concat listagg array_agg bool_and
    bool_or every stddev stddev_samp stddev_pop variance var_samp var_pop corr covar_pop covar_samp
    regr_slope regr_intercept ntile percent_rank cume_dist first_value last_value nth_value lag lead
    row_number rank dense_rank count_if any_value arg_max arg_min max_by min_by list regexp_matches
    regexp_replace regexp_extract regexp_like like glob typeof coalesce upper lower length trim
    """.split()
)


@dataclass(frozen=True)
class Fenced:
    """A statement that passed: the SQL to run (regenerated from the checked tree) and the row cap
    it carries (`max_rows` + 1 when the cap was imposed, so a larger result can be told apart)."""

    sql: str
    limit: int
    capped: bool


def fence(sql: str, dialect: str, tables: Collection[str], max_rows: int) -> Fenced:
    """Check `sql` for `dialect` against the attached `tables` (names, optionally schema-qualified;
    compared case-insensitively) and cap its rows. Raises SqlRefused with the reason otherwise."""
    if dialect not in DIALECTS:
        raise SqlRefused(f"unknown dialect {dialect!r}")
    if not sql.strip():
        raise SqlRefused("the statement is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise SqlRefused(f"the statement is {len(sql):,} characters, over the limit of {MAX_SQL_CHARS:,}")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as err:
        raise SqlRefused(f"it does not parse as {dialect} SQL ({str(err).splitlines()[0][:160]})") from None
    except RecursionError:
        raise SqlRefused("the statement is nested too deeply") from None
    statements = [s for s in statements if not isinstance(s, exp.Semicolon)]
    if len(statements) != 1:
        raise SqlRefused(f"exactly one statement is allowed, found {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise SqlRefused(f"only SELECT is allowed, not {tree.key.upper()}")
    try:
        for node in tree.walk():
            _check_node(node)  # type: ignore[arg-type]  # walk() yields Expressions
        _check_tables(tree, {t.lower() for t in tables})
        return _cap(tree, dialect, max_rows)
    except RecursionError:
        raise SqlRefused("the statement is nested too deeply") from None


_MAX_GROWING_DEPTH = 4  # replace(replace(replace(phone, ...)))) is an idiom; eight deep is a bomb


def _check_node(node: exp.Expression) -> None:
    if isinstance(node, _GROWING):
        depth, up = 1, node.parent
        while up is not None:
            depth += isinstance(up, _GROWING)
            up = up.parent
        if depth > _MAX_GROWING_DEPTH:
            raise SqlRefused(f"string functions nested over {_MAX_GROWING_DEPTH} deep")
    if isinstance(node, exp.With) and node.args.get("recursive"):
        for cte in node.expressions:
            if cte.find(*_GROWING) is not None:
                raise SqlRefused("a recursive CTE may not build strings (concatenation, replace, string_agg)")
    if isinstance(node, _FORBIDDEN_NODES):
        what = "SELECT INTO" if isinstance(node, exp.Into) else node.key.upper()
        if isinstance(node, exp.Lock):
            what = "row locking (FOR UPDATE/SHARE)"
        if isinstance(node, exp.Placeholder | exp.Parameter):
            what = "parameter placeholders"
        raise SqlRefused(f"{what} is not allowed in a read-only query")
    if isinstance(node, exp.Anonymous):
        name = str(node.name).lower()
        if name not in _ALLOWED_UNTYPED:
            raise SqlRefused(f"function {name}() is not allowed")
    elif isinstance(node, exp.Func) and _FORBIDDEN_FUNCS.match(type(node).__name__):
        raise SqlRefused(f"function {node.sql_name().lower()}() is not allowed")


def _cte_in_scope(table: exp.Table) -> bool:
    """Whether a WITH visible from where `table` stands defines its name. A CTE is visible to the
    query that owns its WITH and everything inside it; to a CTE body of the same WITH only when
    defined before it (or it is itself, in a RECURSIVE one). Anything else names a real table,
    whatever a CTE elsewhere in the statement is called (`pg_settings` in a subquery)."""
    name = table.name.lower()
    node: exp.Expr = table
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.With):
            ctes = parent.expressions
            at = next(i for i, c in enumerate(ctes) if c is node)
            visible = ctes[: at + 1] if parent.args.get("recursive") else ctes[:at]
            if any(str(c.alias_or_name).lower() == name for c in visible):
                return True
            node = parent.parent or parent  # past the owning query: its own WITH was just looked at
            continue
        owned = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if owned is not None and node is not owned:
            if any(str(c.alias_or_name).lower() == name for c in owned.expressions):
                return True
        node = parent
    return False


def _check_tables(tree: exp.Expression, allowed: set[str]) -> None:
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):  # a table function: read_csv(...), generate_series
            raise SqlRefused(f"table function {table.this.sql()[:60]} is not allowed")
        name = table.name.lower()
        qualified = ".".join(p.lower() for p in (table.catalog, table.db, table.name) if p)
        if table.catalog or table.db:
            if qualified not in allowed:
                raise SqlRefused(f"table {qualified} is not one of the attached tables")
        elif name not in allowed and not _cte_in_scope(table):
            raise SqlRefused(f"table {name} is not one of the attached tables")


def _cap(tree: exp.Expression, dialect: str, max_rows: int) -> Fenced:
    """A LIMIT at or under the cap stays; a larger one, or none, becomes the cap + 1."""
    if tree.args.get("fetch") is not None:
        raise SqlRefused("FETCH FIRST is not supported here; use LIMIT")
    limit = tree.args.get("limit")
    if limit is not None:
        value = limit.expression if isinstance(limit, exp.Limit) else limit
        if not (isinstance(value, exp.Literal) and value.is_int):
            raise SqlRefused("LIMIT must be a whole number")
        asked = int(value.name)
        if asked <= max_rows:
            return Fenced(tree.sql(dialect=dialect), asked, capped=False)
    assert isinstance(tree, exp.Query)
    capped = tree.limit(max_rows + 1, copy=True)
    return Fenced(capped.sql(dialect=dialect), max_rows + 1, capped=True)
