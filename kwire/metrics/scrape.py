"""Reading a Prometheus text exposition (another broker's /metrics), for kwire's own clients:
the web console's rates (kwire.console.sampler) and share-partitions' record counts
(kwire.console.pages.groups_data)."""
from __future__ import annotations

from typing import Iterable


def unlabelled_values(text: str, names: Iterable[str]) -> dict[str, float]:
    """The values of the samples named ``names`` that carry no label (kwire's all-topics
    counters), summed per name; a name absent from ``text`` is absent from the result."""
    from prometheus_client.parser import text_string_to_metric_families
    wanted = set(names)
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted and not sample.labels:
                found[sample.name] = found.get(sample.name, 0.0) + sample.value
    return found



def labelled_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample named ``name`` in ``text``, in the order given."""
    from prometheus_client.parser import text_string_to_metric_families
    return [(dict(sample.labels), sample.value) for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name]
