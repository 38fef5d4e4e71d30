"""Print `name==floor` for every dependency of pyproject.toml (and of the extras named on the command line), for
CI's lowest-versions job: the floors must install together and pass the suite."""

import re
import sys
import tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
requirements = list(project["dependencies"])
for extra in sys.argv[2:]:
    requirements += project["optional-dependencies"][extra]
pins = []
for requirement in requirements:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*>=\s*([^,;\s]+)", requirement)
    if not match:
        sys.exit(f"no floor in {requirement!r}: every dependency needs one")
    pins.append(f"{match.group(1)}=={match.group(2)}")
print(" ".join(pins))
