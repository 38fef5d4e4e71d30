"""Print `name==floor` for every dependency of pyproject.toml (and of the extras named on the command line), for
CI's lowest-versions job: the floors must install together and pass the suite. `--given` prints the requirements
as written instead (for an install of the newest allowed); `--except NAME` leaves a package out (CI's job without
openvino)."""

import re
import sys
import tomllib

args = sys.argv[1:]
given = "--given" in args
left_out = {args[i + 1] for i, a in enumerate(args) if a == "--except"}
names = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--except")]
project = tomllib.load(open(names[0], "rb"))["project"]
requirements = list(project["dependencies"])
for extra in names[1:]:
    requirements += project["optional-dependencies"][extra]
pins = []
for requirement in requirements:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*>=\s*([^,;\s]+)", requirement)
    if not match:
        sys.exit(f"no floor in {requirement!r}: every dependency needs one")
    if match.group(1) in left_out:
        continue
    pins.append(requirement.replace(" ", "") if given else f"{match.group(1)}=={match.group(2)}")
print(" ".join(pins))
