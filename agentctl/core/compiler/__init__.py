"""The workflow compiler: normalized document → deterministic, fully expanded ``Plan``.

Public API: ``compile_workflow``, ``plan_to_json``, ``check_result_json``, ``child_id``
(the pinned expanded-child id rule), ``CapturedVars`` (var files and CLI variables read
by the caller before compiling), ``foreach_shadow_warnings`` and ``condition_read_warnings``
and ``unused_invocation_input_warnings`` (the warnings of a document that compiles: a
shared variable a foreach item hides; a condition reading a task it does not depend on; a
sub-workflow input passed that nothing takes). Pure: no I/O, clock or randomness.
"""

from __future__ import annotations

from agentctl.core.compiler.compile import compile_workflow
from agentctl.core.compiler.condreads import condition_read_warnings
from agentctl.core.compiler.expand import child_id
from agentctl.core.compiler.render_plan import check_result_json, plan_to_json
from agentctl.core.compiler.shadowing import foreach_shadow_warnings
from agentctl.core.compiler.unusedinputs import unused_invocation_input_warnings
from agentctl.core.compiler.variables import CapturedVars

__all__ = [
    "CapturedVars",
    "check_result_json",
    "child_id",
    "compile_workflow",
    "condition_read_warnings",
    "foreach_shadow_warnings",
    "plan_to_json",
    "unused_invocation_input_warnings",
]
