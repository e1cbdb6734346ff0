"""``FROM `*```: which topics a route for every topic archives, resolved on the driver.

The topics come from the ``topics`` setting (``--topics a,b``; each must exist) or the
``topics_regex`` setting (``--topics-regex 'orders\\..*'``, matched against the whole name of
every non-internal topic on the cluster). (KCQL already refuses a ``*`` route and a named
route writing to the same target.) The job's name is derived from the plan as written
(with ``*``), so a topic that appears later joins the same job and state.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.kcql.plan import Plan

log = logging.getLogger(__name__)


def resolve(
    plan: Plan,
    settings: Settings,
    topic_names: Callable[[], tuple[str, ...]],
    *,
    quiet: bool = False,
) -> Plan:
    """``plan`` with every ``*`` route replaced by one route per topic it archives (with
    ``quiet``, a regex matching nothing is not warned about: a follow session looking
    again).

    Raises:
        ConfigError: a ``*`` route without ``topics``/``topics_regex``, both given, or a bad
            regular expression.
    """
    if not any(route.all_topics for route in plan.routes):
        return plan
    chosen = _chosen(settings, topic_names, quiet)
    routes = []
    for route in plan.routes:
        if not route.all_topics:
            routes.append(route)
            continue
        routes.extend(dataclasses.replace(route, topic=t, matched=True) for t in chosen)
    return Plan(tuple(routes))


def _chosen(
    settings: Settings, topic_names: Callable[[], tuple[str, ...]], quiet: bool = False
) -> tuple[str, ...]:
    if settings.topics and settings.topics_regex:
        raise ConfigError("give FROM `*` its topics with topics or topics_regex, not both")
    if settings.topics:
        names = tuple(dict.fromkeys(t.strip() for t in settings.topics.split(",") if t.strip()))
        if not names:
            raise ConfigError("topics is empty", hint="For example --topics orders,payments")
        return names
    if settings.topics_regex:
        try:
            pattern = re.compile(settings.topics_regex)
        except re.error as exc:
            raise ConfigError(f"topics_regex is not a regular expression: {exc}") from None
        matched = tuple(t for t in topic_names() if pattern.fullmatch(t))
        if not matched and not quiet:
            log.warning(
                "topics_regex %r matches no topic: FROM `*` archives nothing (yet)",
                settings.topics_regex,
            )
        return matched
    raise ConfigError(
        "FROM `*` archives every topic the job is given, and none is given",
        hint="Pass --topics a,b or --topics-regex 'orders\\..*' (or topics:/topics_regex: "
        "in the config file)",
    )
