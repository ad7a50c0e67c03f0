"""The Harbour Rowing Club's MCP server (examples/club, seed 004) for tests/mcp_proxy.rs: the club's fifteen tools,
as the catalog declares them, built with the official Python SDK (`mcp` from PyPI) and served over stdio.

Each tool answers from a small table. With `--calls FILE` every call that reaches the server appends the tool's name
to FILE, so the test can show that a call the policy refuses never arrives.

Usage: server.py [--calls FILE]
"""

import argparse

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--calls")
args = parser.parse_args()

server = MCPServer("harbour-rowing-club", instructions="Answers from the Harbour Rowing Club's records.")


def answered(tool, text):
    if args.calls:
        with open(args.calls, "a") as calls:
            calls.write(tool + "\n")
    return f"{tool}: {text}"


# public
@server.tool()
def club_info(topic: str) -> str:
    """General information about the club."""
    return answered("club_info", f"the club rows on the harbour since 1921 ({topic})")


@server.tool()
def opening_hours(weekday: str) -> str:
    """The boathouse's opening hours."""
    return answered("opening_hours", f"{weekday}: 07:00-21:00")


@server.tool()
def membership_fees(category: str) -> str:
    """The yearly fee of a membership category."""
    return answered("membership_fees", f"{category}: 240 EUR a year")


# applicants (and members)
@server.tool()
def application_status(application_id: str) -> str:
    """Where an application stands."""
    return answered("application_status", f"{application_id}: interview scheduled")


@server.tool()
def trial_session_slots(week: str) -> str:
    """Free places in trial sessions."""
    return answered("trial_session_slots", f"week {week}: Tuesday 18:00, Saturday 10:00")


@server.tool()
def interview_slots(week: str) -> str:
    """Free interview slots."""
    return answered("interview_slots", f"week {week}: Thursday 19:00")


@server.tool()
def required_documents(category: str) -> str:
    """The documents an application needs."""
    return answered("required_documents", f"{category}: swimming certificate, ID")


@server.tool()
def beginner_course_dates(month: str) -> str:
    """When the beginner courses run."""
    return answered("beginner_course_dates", f"{month}: 3rd and 17th")


@server.tool()
def safety_rules(topic: str) -> str:
    """The club's safety rules."""
    return answered("safety_rules", f"{topic}: life jackets below 10 degrees")


@server.tool()
def equipment_rental_prices(item: str) -> str:
    """What renting equipment costs."""
    return answered("equipment_rental_prices", f"{item}: 15 EUR a day")


# members
@server.tool()
def boat_availability(boat_class: str, date: str) -> str:
    """Which boats of a class are free on a date."""
    return answered("boat_availability", f"{boat_class} on {date}: two free")


@server.tool()
def crew_schedule(week: str) -> str:
    """The crews' training schedule."""
    return answered("crew_schedule", f"week {week}: eights on Monday and Thursday")


@server.tool()
def regatta_entries(regatta: str) -> str:
    """The club's entries in a regatta."""
    return answered("regatta_entries", f"{regatta}: three crews entered")


@server.tool()
def locker_assignment(member_id: str) -> str:
    """A member's locker."""
    return answered("locker_assignment", f"{member_id}: locker 42")


@server.tool()
def export_roster(format: str) -> str:
    """The full member roster (names, addresses, phone numbers)."""
    return answered("export_roster", f"the whole roster as {format}: ...")


server.run("stdio")
