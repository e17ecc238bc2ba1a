"""What every asset of the cycle shares: its partitions, one run for many hosts, how a run's
partition keys become the hosts it covers, and what of its metadata lands on each partition.

Each asset is written once, as a function decorated with ``cycle_asset`` (or
``cycle_multi_asset`` for a step that writes several tables). That defines the default per-host
asset and remembers the function, so that the code can define the same graph over ``n`` host
buckets (``cycle_assets_for``) when the home's partitioning asks for them.

A range run's output is one frame for many partitions, and Dagster copies an output's metadata
onto every partition's materialization: the run's totals, tables and plots, once per partition
(hosts x metadata per cycle in the event log, and a figure that claims to be a partition's while
it is the run's). So the asset functions' metadata goes into one observation of the asset per
run, and each partition's materialization carries that partition's own figures: its rows and
hosts in the table written.
"""

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import dagster as dg
import polars as pl

from freshness_pipeline.defs.partitions import (
    bucket_index,
    bucket_keys,
    hosts_in_buckets,
    hosts_partitions,
    n_buckets_of,
    partitions_for,
    selected_hosts,
)
from freshness_pipeline.defs.resources import WarehouseResource
from freshness_pipeline.warehouse.crashpoints import crash_point
from freshness_pipeline.warehouse.storage import Warehouse

GROUP = "freshness_cycle"

#: The metadata keys that count URLs a step held back and why (robots.txt, the network
#: allow-list, a host's Retry-After or circuit breaker, the time limit): the CLI sums them into
#: the cycle's summary, so a cycle that fetched nothing says what stopped it.
HELD_BACK = "held back: "

_ASSET_FUNCTIONS: dict[str, Callable] = {}
_OUTPUTS: dict[str, tuple[str, ...]] = {}  # the tables of each multi-output step, by step name


@contextlib.contextmanager
def single_run_backfills() -> Iterator[None]:
    """Where a cycle step is defined: Dagster calls ``backfill_policy`` beta and warns at every
    definition, four times at each start of `dagster dev` and of every run worker, which a
    user reads as something wrong with their setup. The policy is a choice made and measured
    here (one run for many hosts), so that one warning is silenced, for these definitions
    only."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Parameter `backfill_policy`", category=dg.BetaWarning
        )
        yield


def asset_kwargs(partitions_def: dg.PartitionsDefinition, partitioning: str = "") -> dict:
    kwargs: dict = dict(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name=GROUP,
        kinds={"polars", "parquet"},
    )
    if partitioning:
        kwargs["metadata"] = {"partitioning": partitioning}
    return kwargs


_INPUT_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {}  # step -> input -> columns read
#: the input metadata key the IO manager reads to load only some columns of a table
COLUMNS_KEY = "columns"


def reads_columns(**inputs: Sequence[str]) -> Callable[[Callable], Callable]:
    """Declare that a step reads only these columns of these inputs (put it under
    ``@cycle_asset``): at a million URLs a whole upstream table held for eight of its
    thirty-one columns is a gigabyte the step does not use."""

    def mark(fn: Callable) -> Callable:
        _INPUT_COLUMNS[fn.__name__] = {name: tuple(cols) for name, cols in inputs.items()}
        return fn

    return mark


_SIDE_TABLES: dict[str, dict[str, str]] = {}  # step -> side table -> description
_SIDE_READS: dict[str, tuple[str, ...]] = {}  # step -> side tables of earlier steps it reads


def writes_side_tables(**tables: str) -> Callable[[Callable], Callable]:
    """Declare the tables a step's stage writes itself besides the step's own (put it under
    ``@cycle_asset``), each with its description: they become assets of the step, so the
    lineage graph shows them and a backfill of a host re-derives them. The stage has written
    them when the step's function returns; the step records their materialization."""

    def mark(fn: Callable) -> Callable:
        _SIDE_TABLES[fn.__name__] = dict(tables)
        return fn

    return mark


def reads_side_tables(*tables: str) -> Callable[[Callable], Callable]:
    """Declare tables this step reads that an earlier step of the same cycle writes, or that
    come from outside the cycle (the seeds): the lineage edges. What a step reads of the
    previous cycle's tables is not an edge: the graph has no cycles."""

    def mark(fn: Callable) -> Callable:
        _SIDE_READS[fn.__name__] = tuple(tables)
        return fn

    return mark


def step_tables(name: str) -> tuple[str, ...]:
    """Every table step ``name`` materializes: its own (one, or a multi-asset's), then the
    side tables its stage writes."""
    return (*_OUTPUTS.get(name, (name,)), *_SIDE_TABLES.get(name, {}))


def cycle_asset(fn: Callable) -> dg.AssetsDefinition:
    """The per-host asset of ``fn``; the function is kept for the bucketed variant."""
    _ASSET_FUNCTIONS[fn.__name__] = fn
    return _define(fn.__name__, hosts_partitions)


def cycle_multi_asset(*outputs: str) -> Callable[[Callable], dg.AssetsDefinition]:
    """One step that writes several per-host tables, each an asset of its own (``fn`` yields a
    ``dg.Output`` per table, named after it)."""

    def define(fn: Callable) -> dg.AssetsDefinition:
        _ASSET_FUNCTIONS[fn.__name__] = fn
        _OUTPUTS[fn.__name__] = outputs
        return _define(fn.__name__, hosts_partitions)

    return define


def _define(
    name: str, partitions_def: dg.PartitionsDefinition, partitioning: str = ""
) -> dg.AssetsDefinition:
    kwargs = asset_kwargs(partitions_def, partitioning)
    fn = _ASSET_FUNCTIONS[name]
    outputs = _OUTPUTS.get(name)
    side = _SIDE_TABLES.get(name, {})
    if outputs is None and side:
        fn = _named_output(fn, name)
    body = _per_partition_metadata(fn, n_buckets_of(partitions_def))
    columns = _INPUT_COLUMNS.get(name)
    if columns:
        kwargs["ins"] = {
            table: dg.AssetIn(key=table, metadata={COLUMNS_KEY: list(cols)})
            for table, cols in columns.items()
        }
    reads = _SIDE_READS.get(name)
    if reads:
        kwargs["deps"] = [dg.AssetKey(table) for table in reads]
    if outputs is None and not side:
        with single_run_backfills():
            return dg.asset(**kwargs)(body)
    kinds = kwargs.pop("kinds")
    shown = kwargs.pop("metadata", None)
    outs = {
        table: dg.AssetOut(kinds=kinds, metadata=shown, description=_description(name, table))
        for table in outputs or (name,)
    }
    # written by the stage, not handed to the IO manager: Nothing outputs
    outs |= {
        table: dg.AssetOut(
            kinds=kinds, metadata=shown, description=description, dagster_type=dg.Nothing
        )
        for table, description in side.items()
    }
    with single_run_backfills():
        return dg.multi_asset(name=name, outs=outs, **kwargs)(_with_side_tables(body, tuple(side)))


def _description(name: str, table: str) -> str | None:
    """A table's description: the step function's docstring for the step's own table."""
    return inspect.getdoc(_ASSET_FUNCTIONS[name]) if table == name else None


def _named_output(fn: Callable, name: str) -> Callable:
    """``fn`` (a single-table step) with its Output named after its table, as a multi-asset
    (the step with its side tables) names each output."""

    @functools.wraps(fn)
    def named(context: dg.AssetExecutionContext, *args: object, **kwargs: object) -> object:
        out = fn(context, *args, **kwargs)
        if isinstance(out, dg.Output) and out.output_name == "result":
            return dg.Output(out.value, output_name=name, metadata=out.metadata)
        return out

    return named


def _with_side_tables(body: Callable, side: tuple[str, ...]) -> Callable:
    """``body`` as a multi-asset's function: its own outputs, then one per side table once
    the stage has written them."""

    @functools.wraps(body)
    def step(context: dg.AssetExecutionContext, *args: object, **kwargs: object) -> Iterator:
        result = body(context, *args, **kwargs)
        yield from result if inspect.isgenerator(result) else [result]
        for table in side:
            yield dg.Output(None, output_name=table)

    return step


def step_name(assets_def: dg.AssetsDefinition) -> str:
    """The name a cycle step is defined under (its function's), one per asset or multi-asset."""
    return assets_def.op.name


def cycle_assets_for(
    host_buckets: int, names: Iterable[str], partitioning: str = ""
) -> list[dg.AssetsDefinition]:
    """The steps ``names`` over ``host_buckets`` buckets (0: per host); ``partitioning``, why
    this partitioning, is shown on each asset's definition in the UI."""
    partitions_def = partitions_for(host_buckets)
    return [_define(n, partitions_def, partitioning) for n in names]


_SEEDED: dict[tuple[str, str], list[str]] = {}  # (home, run id) -> its seeded hosts
_SEEDED_RUNS_KEPT = 8


def seeded_hosts(warehouse: Warehouse, run_id: str | None = None) -> list[str]:
    """The home's seeded hosts as a run first saw them: a host handed over (seeded) by the
    run's own inventory step joins its bucket at the next run, not halfway through this one
    (where the steps before would have written nothing for it), and ten thousand host folders
    are listed once per run instead of once per step and input."""
    if run_id is None:
        return warehouse.hosts_in("seeds")
    key = (str(warehouse.home), run_id)
    if key not in _SEEDED:
        while len(_SEEDED) >= _SEEDED_RUNS_KEPT:
            _SEEDED.pop(next(iter(_SEEDED)))
        _SEEDED[key] = warehouse.hosts_in("seeds")
    return _SEEDED[key]


def partition_hosts(
    partition_keys: Iterable[str],
    partitions_def: dg.PartitionsDefinition | None,
    warehouse: Warehouse,
    tags: Mapping[str, str] | None = None,
    run_id: str | None = None,
) -> list[str]:
    """The hosts behind a run's partition keys (the keys themselves, or every seeded host whose
    hash falls in one of the run's buckets), narrowed to those a ``freshness/hosts`` tag in
    ``tags`` names."""
    n_buckets = n_buckets_of(partitions_def)
    keys = list(partition_keys)
    if n_buckets:
        hosts = hosts_in_buckets(keys, n_buckets, seeded_hosts(warehouse, run_id))
    else:
        hosts = keys
    chosen = selected_hosts(tags or {})
    return hosts if chosen is None else [h for h in hosts if h in chosen]


def step_start(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, step: str
) -> tuple[Warehouse, list[str]]:
    """What every step does first: pass its crash point (``asset:<step>:start``, where the
    crash tests kill a run before it has written anything), then find the warehouse and the
    run's hosts."""
    crash_point(f"asset:{step}:start")
    wh = warehouse.warehouse()
    return wh, run_hosts(context, wh)


def run_hosts(context: dg.AssetExecutionContext, warehouse: Warehouse) -> list[str]:
    """This run's hosts; a ``freshness/hosts`` tag that names none of them is a mistake, said
    at once (it would otherwise write empty tables and record a materialization)."""
    partitions_def = context.assets_def.partitions_def
    tags = context.run.tags
    hosts = partition_hosts(
        _partition_keys(context, partitions_def),
        partitions_def,
        warehouse,
        tags,
        context.run.run_id,
    )
    chosen = selected_hosts(tags)
    if chosen is not None:
        missing = sorted(chosen - set(hosts))
        if not hosts:
            raise dg.Failure(
                f"the run's freshness/hosts tag names {', '.join(missing)}, none of which is in "
                f"its partitions ({_where(missing, partitions_def, warehouse)})"
            )
        if missing:
            context.log.info(
                f"freshness/hosts: {len(missing)} named hosts are not in this run's partitions "
                f"({_where(missing, partitions_def, warehouse)})"
            )
    return hosts


def _partition_keys(
    context: dg.AssetExecutionContext, partitions_def: dg.PartitionsDefinition | None
) -> list[str]:
    """The run's partition keys, or a failure that says what to do: launched from the UI with
    no partition, or for a key the code location no longer has, a run failed with Dagster's
    raw "Cannot access partition_key for a non-partitioned run" or "Nonexistent partition
    keys" (found by a newcomer and an exploratory run)."""
    try:
        return list(context.partition_keys)
    except dg.DagsterInvariantViolationError as exc:
        raise dg.Failure(
            "this run names no partitions: a cycle step runs for hosts (or buckets of hosts); "
            "launch it for one partition, a range or all of them (the launchpad's partition "
            "selection), or let the schedule or `freshness cycle` start it"
        ) from exc
    except dg.DagsterInvalidInvocationError as exc:
        now = (
            f"{n_buckets_of(partitions_def)} host buckets"
            if n_buckets_of(partitions_def)
            else "one partition per host"
        )
        raise dg.Failure(
            f"this run's partitions are not the code location's ({now} now): the home's "
            "partitioning changed after the run was launched (a seed load past 100 hosts "
            "moves a home into host buckets), or its hosts were retired; reload the code "
            f"location (Deployment, Reload) and launch the run again. Dagster said: {exc}"
        ) from exc


def _where(
    hosts: list[str], partitions_def: dg.PartitionsDefinition | None, warehouse: Warehouse
) -> str:
    seeded = set(warehouse.hosts_in("seeds"))
    n_buckets = n_buckets_of(partitions_def)
    parts = [
        f"{h}: not seeded"
        if h not in seeded
        else f"{h}: in {bucket_keys(n_buckets)[bucket_index(h, n_buckets)]}"
        if n_buckets
        else f"{h}: its own partition"
        for h in hosts[:5]
    ]
    return "; ".join(parts) + (f"; and {len(hosts) - 5} more" if len(hosts) > 5 else "")


def partition_figures(frame: pl.DataFrame, n_buckets: int) -> dict[str, dict[str, int]]:
    """Rows and hosts of ``frame`` per partition key (hosts, or their buckets)."""
    if "host" not in frame.columns or not frame.height:
        return {}
    per_host = frame.group_by("host").len().drop_nulls("host")
    if n_buckets:
        keys = bucket_keys(n_buckets)
        per_host = per_host.with_columns(
            key=pl.Series([keys[bucket_index(h, n_buckets)] for h in per_host["host"]])
        )
    else:
        per_host = per_host.with_columns(key=pl.col("host"))
    per_key = per_host.group_by("key").agg(
        pl.col("len").sum().alias("rows"), pl.len().alias("hosts")
    )
    return {k: {"rows": int(r), "hosts": int(h)} for k, r, h in per_key.iter_rows()}


def _per_partition_metadata(fn: Callable, n_buckets: int) -> Callable:
    """``fn``, with each Output's metadata moved into one observation of its asset and the
    partitions' own figures put on their materializations."""

    def split(context: dg.AssetExecutionContext, out: dg.Output) -> dg.Output:
        key = context.asset_key_for_output(out.output_name)
        value = out.value
        figures = partition_figures(value, n_buckets) if isinstance(value, pl.DataFrame) else {}
        keys = context.partition_keys
        totals: dict[str, dg.MetadataValue] = {"partitions": dg.MetadataValue.int(len(keys))}
        if isinstance(value, pl.DataFrame):
            totals["rows"] = dg.MetadataValue.int(value.height)
        context.log_event(dg.AssetObservation(asset_key=key, metadata={**out.metadata, **totals}))
        for partition in keys:
            own = figures.get(partition, {"rows": 0, "hosts": 0})
            context.add_asset_metadata(own, asset_key=key, partition_key=partition)
        return out.with_metadata({})

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def each(context: dg.AssetExecutionContext, *args: object, **kwargs: object) -> Iterator:
            for out in fn(context, *args, **kwargs):
                yield split(context, out) if isinstance(out, dg.Output) else out

        return each

    @functools.wraps(fn)
    def one(context: dg.AssetExecutionContext, *args: object, **kwargs: object) -> object:
        out = fn(context, *args, **kwargs)
        return split(context, out) if isinstance(out, dg.Output) else out

    return one
