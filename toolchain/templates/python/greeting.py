"""The plugin's logic, in plain Python: what a Greeting parent should have.

app.py adapts it to the contract (wit/gantry.wit); keeping the logic here,
free of the generated bindings, lets `python3 -m unittest` test it natively.
"""


class InvalidInput(Exception):
    """The parent cannot be served as it is (a permanent error)."""


def greet(parent: dict, config: dict | None) -> dict:
    """The desired state of `parent`: its child ConfigMap, its status and
    the message of its `Greeted` condition."""
    who = (parent.get("spec") or {}).get("who")
    if not isinstance(who, str) or not who:
        raise InvalidInput("spec.who must be a non-empty string")
    name = parent["metadata"]["name"]
    greeting = (config or {}).get("greeting") or "Hello"
    message = f"{greeting}, {who}!"
    child_name = f"{name}-greeting"
    return {
        "child": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": child_name},
            "data": {"message": message},
        },
        "status": {"message": message},
        "condition_message": f"{child_name} says {message}",
    }


def check_config(value) -> str | None:
    """Why the binding's config is refused, or None when it is fine."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "invalid config: expected a map"
    for key in value:
        if key != "greeting":
            return f"invalid config: unknown field `{key}`"
    greeting = value.get("greeting")
    if greeting is not None and (not isinstance(greeting, str) or not greeting.strip()):
        return "config.greeting must not be empty"
    return None
