"""Containers a run's dead driver left running, removed before anything is judged or driven.

A worker killed with its coordinator takes its engine client down with it, but not its
container: the engine keeps that running, and it would go on acting after a ``resume`` judged
its effect uncertain, after an operator reconciled it ``not_applied``, or for ever (a
``while true`` loop, a server). So once nothing may be driving a run any more — ``resume``
claimed it or found it blocked by what a crash left, a ``serve`` took it over (whether it
drives it, hands it back blocked or cancels it), ``cancel`` ended it — every container
labelled with the run is force-removed first, and so is the container of an effect an
operator is about to reconcile whose driver is gone. A plan without container actions never calls an
engine; an engine that cannot remove a container it lists is an error (the caller stops
rather than judge what may still run).
"""

from __future__ import annotations

from typing import Literal

from agentctl.coordinator.launch import container_images, run_trio
from agentctl.core.plan import Plan


def reap_run_containers(plan: Plan, run_id: str) -> None:
    """Remove every container left running for run ``run_id``, none of whose effects a live
    process can still be executing."""
    _reap(plan, "run", run_id)


async def remove_run_containers(plan: Plan, run_id: str) -> None:
    """``reap_run_containers`` from within a trio loop (a ``serve``'s takeover of the run)."""
    engines = _engines(plan)
    if engines:
        await _remove(engines, "run", run_id)


def reap_effect_containers(plan: Plan, effect_id: str) -> None:
    """Remove the container(s) of effect ``effect_id``, already judged uncertain."""
    _reap(plan, "effect", effect_id)


def _engines(plan: Plan) -> set[str]:
    """The engine preferences of ``plan``'s container actions; none for a plan without."""
    return {runtime for runtime, _image in container_images(plan)}


def _reap(plan: Plan, of: Literal["run", "effect"], ident: str) -> None:
    engines = _engines(plan)
    if engines:  # a run without containers starts no event loop and imports no engine code
        run_trio(_remove, engines, of, ident)


async def _remove(engines: set[str], of: Literal["run", "effect"], ident: str) -> None:
    from agentctl.sandbox.container import EFFECT_LABEL, RUN_LABEL, remove_labelled

    key = RUN_LABEL if of == "run" else EFFECT_LABEL
    await remove_labelled(engines, f"{key}={ident}")
