"""`switchboard --help` and each subcommand's help say what every argument is for."""

from __future__ import annotations

import argparse

from board.cli import _parser


def commands(parser: argparse.ArgumentParser, path: str = "switchboard"):
    """(the command's path, its parser, its help in the parent's list) for every subcommand, nested."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub, helps.get(name)
                yield from commands(sub, f"{path} {name}")


def test_every_subcommand_and_every_argument_has_help_text():
    missing = []
    for path, parser, helptext in commands(_parser()):
        if not (helptext or "").strip():
            missing.append(path)
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_every_demo_option_has_help_text():
    demo = dict((path, parser) for path, parser, _ in commands(_parser()))["switchboard demo"]
    options = [a for a in demo._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    assert {o for a in options for o in a.option_strings} == {"--port", "--host", "--duration"}
    assert all((a.help or "").strip() for a in options)
