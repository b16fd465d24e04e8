"""Write one run of another site whole into results/<site>/<run>/, outputs and all. A pull
takes only what comparison needs of another site's run (its figures.json and provenance; the
report and perflogs of a run published without figures.json); the rest stays in the results
repository until asked for here. The run is the one accepted by this site's pull (verified
then), fetched by its tree's id (git checks every object's hash), size caps checked before a
byte is written, its figures.json checked against its own report.json (a run whose figures
its report does not hold is refused), written aside and renamed, never over a run already
here."""

section = "exchange"

example = """
  ./sitebench show beta/20261122T111440Z-ebb65a    # its outputs back, byte for byte
"""

description = "write one run of another site whole into results/ (its outputs on demand)"


def setup_parser(p):
    p.add_argument(
        "run", metavar="SITE/RUN", help="a run accepted by pull, e.g. beta/20261122T111440Z-ebb65a"
    )


def command(args):
    from sitebench.common.errors import SitebenchError
    from sitebench.results.exchange import show

    site, slash, run = args.run.strip("/").partition("/")
    if not slash or not site or not run or "/" in run:
        raise SitebenchError(
            f"{args.run!r} does not name a run as SITE/RUN",
            "e.g. ./sitebench show beta/20261122T111440Z-ebb65a (compare and report name runs)",
        )
    print(f"wrote {site}/{run} into {show(site, run)}")
    return 0
