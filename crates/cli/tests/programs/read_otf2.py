"""Reads an OTF2 archive with OTF2's own Python reader (Debian's python3-otf2)
and prints, as JSON, what the trace tests compare with Hark's numbers:
per world rank, every region's enters and leaves (name, time) and every
MPI send and receive (time, partner as a world rank, bytes); and per
location, by its name, every metric point (member name, mode, time,
value)."""
import json
import sys

import otf2


def world_rank(location):
    # Locations are named "rank N thread T" by Hark's writer; the number is
    # read from the group, which OTF2 links to the location.
    name = location.group.name
    return int(name.split()[1]) if name.startswith("rank ") else -1


def main(path):
    out = {}
    metrics = {}
    with otf2.reader.open(path) as trace:
        clock = trace.definitions.clock_properties
        for location, event in trace.events:
            if isinstance(event, otf2.events.Metric):
                for member, value in zip(event.metric.members, event.values):
                    metrics.setdefault(location.name, []).append(
                        [member.name, str(member.metric_mode), event.time, value])
                continue
            r = out.setdefault(str(world_rank(location)), {
                "enter": [], "leave": [], "send": [], "recv": [], "coll": 0,
            })
            t = event.time
            if isinstance(event, otf2.events.Enter):
                r["enter"].append([event.region.name, t])
            elif isinstance(event, otf2.events.Leave):
                r["leave"].append([event.region.name, t])
            elif isinstance(event, otf2.events.MpiSend):
                peer = event.communicator.group.members[event.receiver]
                r["send"].append([t, world_rank(peer), event.msg_length])
            elif isinstance(event, otf2.events.MpiRecv):
                peer = event.communicator.group.members[event.sender]
                r["recv"].append([t, world_rank(peer), event.msg_length])
            elif isinstance(event, otf2.events.MpiCollectiveEnd):
                r["coll"] += 1
    json.dump({"offset": clock.global_offset, "ranks": out, "metrics": metrics},
              sys.stdout)


main(sys.argv[1])
