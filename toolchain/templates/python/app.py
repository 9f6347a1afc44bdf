"""__NAME__: a Gantry reconcile plugin in Python.

A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose `message`
is "<config.greeting>, <spec.who>!". The logic is in greeting.py; this
module adapts it to the `reconciler` world of wit/gantry.wit, which
componentize-py builds it against (`wit_world` is generated from it). JSON
crosses the boundary as strings; errors are raised as `Err`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.reconcile import (
    Condition,
    ConditionStatus,
    PluginError,
    Request,
    Response,
)

import greeting


class Reconcile(exports.Reconcile):
    """The `reconcile` interface."""

    def reconcile(self, request: Request) -> Response:
        if request.finalizing:
            return Response([], None, [], [], None, True)
        try:
            wanted = greeting.greet(json.loads(request.parent), json.loads(request.config))
        except greeting.InvalidInput as e:
            raise Err(PluginError(str(e), "InvalidInput", False))
        condition = Condition(
            "Greeted",
            ConditionStatus.TRUE,
            "ConfigMapWritten",
            wanted["condition_message"],
        )
        return Response(
            [json.dumps(wanted["child"])],
            json.dumps(wanted["status"]),
            [condition],
            [],
            None,
            False,
        )


class Config(exports.Config):
    """The `config` interface: check a binding's config."""

    def validate_config(self, config: str) -> None:
        refused = greeting.check_config(json.loads(config))
        if refused is not None:
            raise Err(refused)
