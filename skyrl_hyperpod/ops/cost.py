"""`cost`: hourly and monthly estimate of the configured platform from a dated price file.

Prices live in data/prices/<region>.yaml (as_of date, currency, a source per price). HyperPod instance
prices could not be confirmed against a primary source: the file marks them `confirmed: false` and the
output repeats that. `--prices FILE` replaces the whole file; `--live` asks the AWS Price List API for
the HyperPod instance prices and keeps the file's figure where the API has none.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import date
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from skyrl_hyperpod.config import ConfigError, ProjectConfig, read_yaml
from skyrl_hyperpod.config.base import StrictModel
from skyrl_hyperpod.config.hyperpod import InstanceGroupConfig
from skyrl_hyperpod.config.training import REFERENCE_RUN_HOURS
from skyrl_hyperpod.plumbing.errors import ProblemsError
from skyrl_hyperpod.values.stack_outputs import PLACEHOLDER_REGION
from skyrl_hyperpod.values.synthesized_manifests import config_fingerprint

# The price files ship inside the package (package data), so an installed `skyrl-hp cost` finds them.
PRICES_PACKAGE = "skyrl_hyperpod.prices"
SHIPPED_PRICES_LABEL = "skyrl_hyperpod/prices"
# The AWS Price List API is served from a few regions only; us-east-1 answers for every region.
PRICE_LIST_API_REGION = "us-east-1"
# Without any region setting, price the reference deployment's region (the default hyperpod_az_id is in it).
DEFAULT_PRICE_REGION = PLACEHOLDER_REGION
# No public number for the reference run's wall time was found; a day is the stated default, shared with
# the step time the checkpoint interval is derived from.
DEFAULT_RUN_HOURS = REFERENCE_RUN_HOURS
# How read_yaml (shared with the config loader) starts its problems; price-file problems say "cost error: ".
_READ_YAML_PREFIX = "config error: "


# Upper bounds of a price file's numbers: no AWS unit price comes near $100,000, no assumed monthly quantity near a
# billion units, and no month has more than 31 x 24 hours.
MAX_UNIT_USD = 100_000
MAX_ASSUMED_QUANTITY = 1_000_000_000
MAX_HOURS_PER_MONTH = 744
# `cost --hours`: one run of up to a year.
MAX_RUN_HOURS = 8_760


class Price(StrictModel):
    usd: float = Field(ge=0, le=MAX_UNIT_USD)
    source: str = Field(min_length=1)
    confirmed: bool = True
    note: str | None = None


class NominalItem(StrictModel):
    """A usage-driven cost shown as a nominal figure: an assumed monthly quantity times a unit price."""

    label: str
    assumed_quantity: float = Field(ge=0, le=MAX_ASSUMED_QUANTITY)
    unit: str
    usd_per_unit: float = Field(ge=0, le=MAX_UNIT_USD)
    source: str = Field(min_length=1)
    confirmed: bool = True
    note: str | None = None


class PriceBook(StrictModel):
    region: str
    currency: Literal["USD"]
    as_of: date
    hours_per_month: float = Field(default=730, gt=0, le=MAX_HOURS_PER_MONTH)
    hyperpod_instance_hour: dict[str, Price]
    hyperpod_ebs_gb_month: Price
    eks_control_plane_hour: Price
    # deployment type -> per-unit storage throughput (MB/s/TiB) -> $/GiB-month
    fsx_lustre_gib_month: dict[str, dict[int, Price]]
    fsx_compression_note: str | None = None
    nat_gateway_hour: Price
    # The managed MLflow App's rate (tracking.backend: mlflow without a tracking_uri). Unset in the shipped files (no
    # primary source was read): the App is then listed unpriced; a --prices file with the rate prices it.
    mlflow_app_hour: Price | None = None
    nominal: dict[Literal["nat_data", "ecr_storage", "s3_artifacts", "prometheus", "cloudwatch_logs"], NominalItem]


class PriceError(ProblemsError):
    """Unusable price data; `problems` holds one line each."""


def _shipped_prices() -> Traversable:
    return resources.files(PRICES_PACKAGE)


def available_regions() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in _shipped_prices().iterdir() if p.name.endswith(".yaml"))


def price_file_for(region: str) -> Traversable:
    file = _shipped_prices() / f"{region}.yaml"
    if not file.is_file():
        raise PriceError(
            [
                f"cost error: no price data for region {region!r} (have: {', '.join(available_regions()) or 'none'}); "
                f"pass --prices FILE with the same layout as {SHIPPED_PRICES_LABEL}/us-west-2.yaml"
            ]
        )
    return file


def price_book_for(region: str | None, prices_file: Path | None) -> tuple[Path | Traversable, PriceBook]:
    """The price file (`prices_file`, else the shipped one of `region`) and its book; a PriceError when the
    file is unusable or holds another region's prices."""
    file = prices_file if prices_file is not None else price_file_for(region or DEFAULT_PRICE_REGION)
    book = load_price_book(file)
    if region and book.region != region:
        raise PriceError([f"cost error: {file} holds prices for {book.region}, not {region}"])
    return file, book


def apply_live_prices(config: ProjectConfig, book: PriceBook, pricing_client: Any) -> tuple[PriceBook, list[str]]:
    """`book` with the Price List API's HyperPod prices of the configured instance types, and the types it
    had no price for (their file figures stay)."""
    types = [group.instance_type for group in config.hyperpod.instance_groups.values()]
    found = live_hyperpod_prices(pricing_client, book.region, types)
    return with_live_prices(book, found), sorted(set(types) - set(found))


def load_price_book(file: Path | Traversable) -> PriceBook:
    try:
        with resources.as_file(file) as path:
            data = read_yaml(path, empty_ok=True)
    except ConfigError as exc:
        # read_yaml words its one-line problems for the config file; these are about the price file.
        problems = [f"cost error: {problem.removeprefix(_READ_YAML_PREFIX)}" for problem in exc.problems]
        raise PriceError(problems) from None
    try:
        return PriceBook.model_validate(data)
    except ValidationError as exc:
        raise PriceError(
            [
                f"cost error: {file}: {'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
        ) from None


@dataclass(frozen=True)
class LineItem:
    component: str
    quantity: str
    unit_price: str
    hourly_usd: float
    monthly_usd: float
    confirmed: bool
    note: str = ""
    # An autoscaled group (hyperpod.worker_group.scaling: on_demand): its nodes bill only while they run, so it is in
    # a run's cost and not in the idle day's or the month's.
    on_demand: bool = False


@dataclass(frozen=True)
class Estimate:
    region: str
    currency: str
    as_of: str
    price_file: str
    hours_per_month: float
    run_hours: float
    items: list[LineItem]
    # Which configuration this estimate prices (the fingerprint dist/'s stamp and the ConfigFingerprint output
    # carry): `skyrl-hp review` refuses a side whose cost.json, cdk.out and dist/ come from different ones.
    config_fingerprint: str
    # The configured experiments: they run one at a time (each takes every GPU node), so a sweep costs one run each.
    experiments: tuple[str, ...] = ()
    # Between two runs of a sweep, the finished job's cluster keeps the nodes (job_ttl_seconds_after_finished of a
    # self-contained RayJob) and the next RayJob waits for it to go.
    sweep_gap_hours: float = 0.0

    @property
    def hourly_usd(self) -> float:
        return sum(i.hourly_usd for i in self.items)

    @property
    def monthly_usd(self) -> float:
        return sum(i.monthly_usd for i in self.items)

    @property
    def idle_per_day_usd(self) -> float:
        # HyperPod bills provisioned nodes whether or not a job runs: idle = everything but on-demand nodes for 24 h.
        return sum(i.hourly_usd for i in self.items if not i.on_demand) * 24

    @property
    def has_on_demand(self) -> bool:
        return any(i.on_demand for i in self.items)

    @property
    def run_usd(self) -> float:
        return self.hourly_usd * self.run_hours

    @property
    def sweep_hours(self) -> float:
        runs = max(1, len(self.experiments))
        return self.run_hours * runs + self.sweep_gap_hours * (runs - 1)

    @property
    def sweep_usd(self) -> float:
        return self.hourly_usd * self.sweep_hours

    @property
    def unconfirmed(self) -> list[str]:
        return [i.component for i in self.items if not i.confirmed]

    def to_json(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "currency": self.currency,
            "prices_as_of": self.as_of,
            "price_file": self.price_file,
            "hours_per_month": self.hours_per_month,
            "config_fingerprint": self.config_fingerprint,
            "items": [asdict(i) for i in self.items],
            "totals": {
                "hourly": round(self.hourly_usd, 4),
                "monthly": round(self.monthly_usd, 2),
                "idle_per_day": round(self.idle_per_day_usd, 2),
                "training_run": {"hours": self.run_hours, "cost": round(self.run_usd, 2)},
                "sweep": {
                    "experiments": list(self.experiments),
                    "hours": self.sweep_hours,
                    "cost": round(self.sweep_usd, 2),
                },
            },
            "unconfirmed": self.unconfirmed,
        }


MLFLOW_APP_COMPONENT = "SageMaker MLflow App (tracking.backend: mlflow)"
# No primary source for the managed MLflow App's price was read when this was written (December 2026): without
# mlflow_app_hour in the price file the line is shown unpriced and unconfirmed rather than with a guessed figure, so
# the totals leave it out and say so.
MLFLOW_APP_UNPRICED = Price(
    usd=0,
    source="https://aws.amazon.com/sagemaker/ai/pricing/",
    confirmed=False,
    note="not priced: no primary source for the MLflow App's price was read (December 2026); the totals leave it "
    "out; add its rate as mlflow_app_hour to a --prices file (see https://aws.amazon.com/sagemaker/ai/pricing/, "
    "managed MLflow)",
)


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:,.4f}"


def _instance_group_item(group: InstanceGroupConfig, book: PriceBook, source_name: str) -> LineItem:
    price = book.hyperpod_instance_hour.get(group.instance_type)
    if price is None:
        raise PriceError(
            [
                f"cost error: {source_name} has no hourly price for {group.instance_type} "
                f"(hyperpod.{group.name} group); add hyperpod_instance_hour.{group.instance_type} or pass --prices FILE"
            ]
        )
    hourly = price.usd * group.instance_count
    on_demand_note = (
        "on demand: 0 nodes while idle, up to the count while jobs run; the hourly figure is every node running, the "
        "monthly one leaves the group out (it depends on use: the scaling comparison below prices idle, run and sweep)"
    )
    return LineItem(
        component=f"HyperPod group {group.name} ({group.instance_type})",
        quantity=f"{'0 to ' if group.autoscaled else ''}{group.instance_count} x {group.instance_type}",
        unit_price=f"{_money(price.usd)}/instance-hour",
        hourly_usd=hourly,
        monthly_usd=0.0 if group.autoscaled else hourly * book.hours_per_month,
        confirmed=price.confirmed,
        note=" ".join(n for n in (price.note, on_demand_note if group.autoscaled else None) if n),
        on_demand=group.autoscaled,
    )


def _hourly_item(component: str, quantity: float, label: str, price: Price, book: PriceBook, unit: str) -> LineItem:
    hourly = price.usd * quantity
    return LineItem(
        component=component,
        quantity=label,
        unit_price=f"{_money(price.usd)}/{unit}",
        hourly_usd=hourly,
        monthly_usd=hourly * book.hours_per_month,
        confirmed=price.confirmed,
        note=price.note or "",
    )


def _monthly_item(
    component: str,
    quantity: float,
    label: str,
    usd_per_unit: float,
    unit: str,
    *,
    confirmed: bool,
    note: str,
    book: PriceBook,
) -> LineItem:
    monthly = usd_per_unit * quantity
    return LineItem(
        component=component,
        quantity=label,
        unit_price=f"{_money(usd_per_unit)}/{unit}",
        hourly_usd=monthly / book.hours_per_month,
        monthly_usd=monthly,
        confirmed=confirmed,
        note=note,
    )


def display_path(file: Path | Traversable) -> str:
    """Package-relative for the shipped files, so output and docs carry no machine paths."""
    if isinstance(file, Path) and file.parent.resolve() != Path(str(_shipped_prices())).resolve():
        return str(file)
    return f"{SHIPPED_PRICES_LABEL}/{file.name}"


def estimate(config: ProjectConfig, book: PriceBook, *, price_file: str, run_hours: float) -> Estimate:
    """Every component the configuration deploys, priced from `book`."""
    groups = tuple(config.hyperpod.instance_groups.values())
    items = [_instance_group_item(group, book, price_file) for group in groups]

    ebs = book.hyperpod_ebs_gb_month
    # An on-demand node's volume exists only while the node does: like the node, in a run's cost, not the idle day's.
    for on_demand in (False, True):
        ebs_gb = sum(g.instance_count * g.ebs_volume_gb for g in groups if g.autoscaled == on_demand)
        if on_demand and not ebs_gb:
            continue
        volumes = _monthly_item(
            "HyperPod node EBS volumes" + (" (on-demand nodes)" if on_demand else ""),
            ebs_gb,
            f"{'0 to ' if on_demand else ''}{ebs_gb} GB",
            ebs.usd,
            "GB-month",
            confirmed=ebs.confirmed,
            note=ebs.note or "",
            book=book,
        )
        items.append(replace(volumes, monthly_usd=0.0, on_demand=True) if on_demand else volumes)
    items.append(_hourly_item("EKS control plane", 1, "1 cluster", book.eks_control_plane_hour, book, "hour"))

    fsx = config.fsx
    fsx_price = book.fsx_lustre_gib_month.get(fsx.deployment_type, {}).get(fsx.per_unit_storage_throughput)
    if fsx_price is None:
        raise PriceError(
            [
                f"cost error: {price_file} has no FSx for Lustre price for {fsx.deployment_type} at "
                f"{fsx.per_unit_storage_throughput} MB/s/TiB; add fsx_lustre_gib_month.{fsx.deployment_type}."
                f"{fsx.per_unit_storage_throughput}"
            ]
        )
    fsx_note = " ".join(
        n for n in (fsx_price.note, book.fsx_compression_note if fsx.data_compression != "NONE" else None) if n
    )
    items.append(
        _monthly_item(
            f"FSx for Lustre {fsx.deployment_type} {fsx.per_unit_storage_throughput} MB/s/TiB, {fsx.data_compression}",
            fsx.storage_capacity_gib,
            f"{fsx.storage_capacity_gib} GiB",
            fsx_price.usd,
            "GiB-month",
            confirmed=fsx_price.confirmed,
            note=fsx_note,
            book=book,
        )
    )
    nats = config.network.nat_gateways
    items.append(_hourly_item("NAT gateway(s)", nats, f"{nats} gateway(s)", book.nat_gateway_hour, book, "hour"))
    if config.tracking.managed_app:
        app_price = book.mlflow_app_hour or MLFLOW_APP_UNPRICED
        items.append(_hourly_item(MLFLOW_APP_COMPONENT, 1, "1 app", app_price, book, "hour"))

    for key, nominal in book.nominal.items():
        if key == "prometheus" and not config.observability.enabled:
            continue
        items.append(
            _monthly_item(
                f"{nominal.label} (nominal)",
                nominal.assumed_quantity,
                f"{nominal.assumed_quantity:g} {nominal.unit} (assumed)",
                nominal.usd_per_unit,
                nominal.unit,
                confirmed=nominal.confirmed,
                note=nominal.note or "",
                book=book,
            )
        )
    return Estimate(
        region=book.region,
        currency=book.currency,
        as_of=book.as_of.isoformat(),
        price_file=price_file,
        hours_per_month=book.hours_per_month,
        run_hours=run_hours,
        items=items,
        config_fingerprint=config_fingerprint(config),
        experiments=tuple(run.experiment.name for run in config.derived.runs),
        sweep_gap_hours=sweep_gap_hours(config),
    )


def sweep_gap_hours(config: ProjectConfig) -> float:
    jobs = config.training.jobs
    return jobs.job_ttl_seconds_after_finished / 3600 if jobs.self_contained_jobs else 0.0


def render_table(est: Estimate) -> str:
    headers = ("Component", "Quantity", "Unit price", "Hourly", f"Monthly ({est.hours_per_month:g} h)")
    rows = [
        (
            i.component + ("" if i.confirmed else " *"),
            i.quantity,
            i.unit_price,
            _money(i.hourly_usd),
            _money(i.monthly_usd),
        )
        for i in est.items
    ]
    rows.append(("Total", "", "", _money(est.hourly_usd), _money(est.monthly_usd)))
    widths = [max(len(str(r[c])) for r in (headers, *rows)) for c in range(len(headers))]

    def line(row: tuple[str, ...]) -> str:
        cells = [
            str(v).ljust(w) if c < 3 else str(v).rjust(w) for c, (v, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    out = [
        f"Cost estimate for region {est.region} ({est.currency}, prices as of {est.as_of}, from {est.price_file})",
        "",
        line(headers),
        "  ".join("-" * w for w in widths),
        *[line(r) for r in rows[:-1]],
        "  ".join("-" * w for w in widths),
        line(rows[-1]),
        "",
        *(
            [
                f"Idle cluster per day (no job, on-demand nodes at 0): {_money(est.idle_per_day_usd)}",
                f"One training run of {est.run_hours:g} h: {_money(est.run_usd)} (every node running; the scaling "
                "comparison below adds the on-demand nodes' start and idle minutes)",
            ]
            if est.has_on_demand
            else [
                f"Idle cluster per day (everything running, no job): {_money(est.idle_per_day_usd)}",
                f"One training run of {est.run_hours:g} h: {_money(est.run_usd)} (nodes bill the same with or without "
                "a job)",
            ]
        ),
    ]
    if len(est.experiments) > 1:
        out.append(
            f"The sweep, {len(est.experiments)} experiments one at a time ({', '.join(est.experiments)}): "
            f"{est.sweep_hours:g} h, {_money(est.sweep_usd)}"
        )
    notes = [f"  {i.component}: {i.note}" for i in est.items if i.note]
    if notes:
        out += ["", "Notes:", *notes]
    if est.unconfirmed:
        out += [
            "",
            "* unconfirmed: not checked against a primary AWS price source; confirm on the AWS pricing pages "
            "or use --live / --prices FILE.",
        ]
    return "\n".join(out)


def render_json(est: Estimate) -> str:
    return json.dumps(est.to_json(), indent=2)


# --- AWS Price List API (--live) --------------------------------------------------------------------------


def _on_demand_hourly(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "").lower().startswith("hr"):
                value = float(usd)
                if value > 0:
                    return value
    return None


def _is_hyperpod(product: dict[str, Any]) -> bool:
    attributes = product.get("product", {}).get("attributes", {})
    return any("hyperpod" in str(v).lower() for v in attributes.values())


def live_hyperpod_prices(pricing_client: Any, region: str, instance_types: list[str]) -> dict[str, Price]:
    """HyperPod on-demand hourly prices from the Price List API; types without a HyperPod product are left out."""
    found: dict[str, Price] = {}
    for instance_type in sorted(set(instance_types)):
        paginator = pricing_client.get_paginator("get_products")
        pages = paginator.paginate(
            ServiceCode="AmazonSageMaker",
            FormatVersion="aws_v1",
            Filters=[
                {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            ],
        )
        for page in pages:
            for raw in page.get("PriceList", []):
                product = json.loads(raw) if isinstance(raw, str) else raw
                hourly = _on_demand_hourly(product) if _is_hyperpod(product) else None
                if hourly is not None:
                    sku = product.get("product", {}).get("sku", "?")
                    found[instance_type] = Price(
                        usd=hourly,
                        source=f"AWS Price List API, AmazonSageMaker sku {sku}, read {date.today().isoformat()}",
                        confirmed=True,
                    )
                    break
            if instance_type in found:
                break
    return found


def with_live_prices(book: PriceBook, live: dict[str, Price]) -> PriceBook:
    merged = {**book.hyperpod_instance_hour, **live}
    return book.model_copy(update={"hyperpod_instance_hour": merged})
