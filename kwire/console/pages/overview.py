"""The overview: brokers and controller, partition health, produce/consume rates, the groups
with the most lag.  Everything comes from the sampler, so the page costs no broker request."""
from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

NAV = [("Overview", "/")]
TOP_GROUPS = 10
FIRST_SAMPLE_WAIT_S = 8.0


async def current_sample(console):
    """The sampler's latest sample; before the first one, wait for it (a fresh console)."""
    sample = console.sampler.latest
    if not sample.at:
        sample = await console.access.run(console.sampler.wait_for_sample, 0.0, FIRST_SAMPLE_WAIT_S)
    return sample


def rate_labels(sample) -> list[str]:
    """What the two rates are: the brokers' own counters when /metrics is read, else offsets."""
    if sample.broker_counters is not None:
        return ["records in/s (broker metrics)", "bytes out/s to consumers (broker metrics)"]
    return ["produced records/s (end offsets)", "committed records/s (group offsets)"]


def routes(console) -> list:
    async def overview(request: Request):
        sample = await current_sample(console)
        groups = sorted(sample.groups.values(), key=lambda g: g.total_lag, reverse=True)[:TOP_GROUPS]
        rates = list(console.sampler.rates)
        latest = next(((p, c) for _, p, c in reversed(rates) if p is not None), (None, None))
        chart = {"x": [at for at, p, _ in rates if p is not None],
                 "ys": [[round(p, 1) for _, p, _ in rates if p is not None],
                        [round(c, 1) for _, p, c in rates if p is not None]],
                 "labels": rate_labels(sample), "unit": "per second"}
        template = "overview_body.html" if request.headers.get("hx-request") else "overview.html"
        return console.render(request, template, sample=sample, counts=sample.counts(), groups=groups,
                              produce_rate=latest[0], consume_rate=latest[1], chart=chart,
                              brokers=sorted(sample.brokers.items()),
                              sample_interval=console.sampler.interval_s, rate_labels=rate_labels(sample))
    return [Route("/", overview)]
