"""A server started with `--config FILE`: the arguments that file adds, spliced into its
command line where vLLM's FlexibleArgumentParser splices them (after the subcommand and a
positional model, before the other flags, so a flag given on the command line wins), and
written as vLLM writes them (`--key value`, `--key` for true, a list's items after the
key, a mapping as JSON). Every reader of a server's settings (port, target, drafter)
then sees what the server parsed."""

import os

from fleetcheck.probe.files import ProbeFileError, read_bytes

# yaml_subset and json are imported where a `--config` file is read: they load `re` and
# `json`, which a host with no such server never needs (benchmarks/probe_cost.py, rows
# "shared analysis, follower ..." with and without them)

MAX_CONFIG_FILE_BYTES = 1024 * 1024


def file_args(config):
    """vLLM's load_config_file: the YAML mapping as command-line arguments, keys as
    written (vLLM's parser turns `_` into `-` later, as the readers here accept both). A
    false boolean adds `--no-KEY` only where vLLM's parser has that flag, which no setting
    read here has, so it adds nothing."""
    out = []
    for key, value in config.items():
        flag = "--%s" % (key,)
        if isinstance(value, bool):
            if value:
                out.append(flag)
        elif isinstance(value, list):
            if value:
                out.append(flag)
                out.extend(str(item) for item in value)
        elif isinstance(value, dict):
            import json  # as vLLM writes a mapping: json.dumps, its separators and escapes
            out.extend([flag, json.dumps(value)])
        else:
            out.extend([flag, str(value)])
    return out


def pulled(args, added):
    """vLLM's _pull_args_from_config on the arguments after the program: `--config FILE`
    replaced by the file's arguments, after `serve` and a positional model (so the
    command line's own flags, later, win), else first."""
    at = args.index("--config")
    rest = args[at + 2:]
    if args[0].startswith("-"):
        return added + args[:at] + rest
    if args[0] == "serve" or args[:2] == ["snapshot", "create"]:
        model_at = 1 if args[0] == "serve" else 2
        if len(args) > model_at and not args[model_at].startswith("-"):
            return args[:model_at + 1] + added + args[model_at + 1:at] + rest
        return args[:model_at] + added + args[model_at:at] + rest
    return [args[0]] + added + args[1:at] + rest


def args_start(argv, index):
    """Where the arguments vLLM parses begin: after `vllm` (at index) or `-m MODULE`."""
    if index is not None:
        return index + 1
    return argv.index("-m") + 2 if "-m" in argv[:-1] else 1


def with_config_file(pid, argv, cwd, index, owner):
    """(the arguments the server parsed, an error or None): argv itself when no
    `--config` is given or the file cannot be read (the error says why). The file is
    read only where the server's `owner` could read it."""
    result = argv, None
    start = args_start(argv, index)
    if "--config" in argv[start:-1]:
        from fleetcheck.probe.yaml_subset import YamlError, load
        path = argv[argv.index("--config", start) + 1]
        full = os.path.normpath(path if os.path.isabs(path) or not cwd
                                else os.path.join(cwd, path))
        try:
            config = load(read_bytes(full, MAX_CONFIG_FILE_BYTES, owner).decode(
                "utf-8", "replace"))
        except ProbeFileError as exc:
            result = argv, "cannot read --config %s: %s" % (path, exc)
        except YamlError as exc:
            result = argv, "--config %s is YAML this probe does not read (%s): its " \
                           "settings are unknown" % (path, exc)
        else:
            if not isinstance(config, dict):
                result = argv, "--config %s is not a mapping of settings" % path
            else:
                result = argv[:start] + pulled(argv[start:], file_args(config)), None
    return result
