"""Reading the YAML files users write (inventories, playbooks): one place for the loader
choice and for errors that name the file."""

from __future__ import annotations

from typing import Any

import yaml

from fleetcheck.input_error import InputError

# libyaml's safe loader when PyYAML was built with it: the pure-Python one spends ~15 ms of
# controller start-up on the packaged playbook alone. Same documents, same safety.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=SAFE_LOADER)
    except OSError as exc:
        raise InputError(path, None, None, "cannot read: %s" % exc.strerror)
    except yaml.YAMLError as exc:
        raise InputError(path, None, None, "not valid YAML: %s" % exc)
