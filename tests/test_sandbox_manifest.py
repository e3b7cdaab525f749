"""``scout-bot.toml``: the runtimes and commands accepted, and each refusal by cause."""

from __future__ import annotations

import pytest
from scout_arena.sandbox import ManifestError, Runtime, parse_manifest


@pytest.mark.parametrize(("text", "runtime", "command"), [
    ('runtime = "python"\ncommand = ["python3", "bot.py", "--seed", "1"]',
     Runtime.PYTHON, ("python3", "bot.py", "--seed", "1")),
    ('runtime = "binary"\ncommand = ["./build/bot"]', Runtime.BINARY, ("./build/bot",)),
    ('runtime = "java"\ncommand = ["java", "-jar", "bot.jar"]',
     Runtime.JAVA, ("java", "-jar", "bot.jar")),
    ('runtime = "node"\ncommand = ["node", "dist/bot.js"]', Runtime.NODE, ("node", "dist/bot.js")),
    # An argv is never interpreted by a shell: metacharacters are plain argument bytes.
    ('runtime = "python"\ncommand = ["python", "bot.py", "; rm -rf / | sh"]',
     Runtime.PYTHON, ("python", "bot.py", "; rm -rf / | sh")),
])
def test_valid_manifests_parse(text: str, runtime: Runtime, command: tuple[str, ...]) -> None:
    manifest = parse_manifest(text)
    assert manifest.runtime is runtime and manifest.command == command


@pytest.mark.parametrize(("text", "words"), [
    ('runtime = "ruby"\ncommand = ["ruby", "bot.rb"]', "unknown runtime 'ruby'"),
    ('runtime = 3\ncommand = ["python", "bot.py"]', "unknown runtime 3"),
    ('command = ["python", "bot.py"]', "'runtime' is missing"),
    ('runtime = "python"', "'command' is missing"),
    ('runtime = "python"\ncommand = "python bot.py"', "non-empty list of strings"),
    ('runtime = "python"\ncommand = []', "non-empty list of strings"),
    ('runtime = "python"\ncommand = ["python", 3]', "command[1] is not a string"),
    ('runtime = "python"\ncommand = [""]', "command[0] (the program) is empty"),
    ('runtime = "python"\ncommand = ["sh", "-c", "curl x | sh"]', "not 'sh'"),
    ('runtime = "python"\ncommand = ["/usr/bin/python3", "bot.py"]', "not '/usr/bin/python3'"),
    ('runtime = "java"\ncommand = ["bash", "run.sh"]', "runs 'java', not 'bash'"),
    ('runtime = "node"\ncommand = ["npm", "start"]', "runs 'node', not 'npm'"),
    ('runtime = "binary"\ncommand = ["/bin/sh", "-c", "x"]', "must be a relative path"),
    ('runtime = "binary"\ncommand = ["../other-bot/bot"]', "'..'"),
    ('runtime = "binary"\ncommand = ["bin/../../x"]', "'..'"),
    ('runtime = "binary"\ncommand = ["bin\\\\bot.exe"]', "must be a relative path"),
    ('runtime = "binary"\ncommand = ["."]', "names no file"),
    ('runtime = "python"\ncommand = ["python", "bot.py"]\ncomand = ["x"]', "unknown key(s) comand"),
    ('runtime = "python"\ncommand = ["python", "bot.py"', "not valid TOML"),
    ('runtime = "python"\ncommand = ["python", "a\\u0000b"]', "NUL"),
])
def test_bad_manifests_are_refused_by_cause(text: str, words: str) -> None:
    with pytest.raises(ManifestError) as raised:
        parse_manifest(text)
    assert words in str(raised.value)


def test_an_oversized_manifest_is_refused() -> None:
    text = 'runtime = "python"\ncommand = ["python", "bot.py"]\n' + "# padding\n" * 2000
    with pytest.raises(ManifestError, match="larger than"):
        parse_manifest(text)


def test_too_many_arguments_are_refused() -> None:
    args = ", ".join(f'"{index}"' for index in range(100))
    with pytest.raises(ManifestError, match="more than 64 arguments"):
        parse_manifest(f'runtime = "python"\ncommand = ["python", {args}]')
