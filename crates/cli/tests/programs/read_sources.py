"""Prints, as JSON, the source locations a trace gives its calls: for an
OTF2 archive (`.otf2`, read with OTF2's Python reader) the `source`
attribute of each Enter, for a Perfetto trace (read with the `perfetto`
package's protobuf schema) the `source_file` and `source_line` debug
annotations of each slice: a list of [call, file, line], in trace order."""
import json
import sys


def otf2_sources(path):
    import otf2

    out = []
    with otf2.reader.open(path) as trace:
        for _, event in trace.events:
            if not isinstance(event, otf2.events.Enter) or not event.attributes:
                continue
            for attribute, value in event.attributes.items():
                if attribute.name == "source":
                    out.append([event.region.name, str(value.file), value.line_number])
    return out


def perfetto_sources(path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    out = []
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.type != pb.TrackEvent.TYPE_SLICE_BEGIN:
            continue
        args = {a.name: a for a in e.debug_annotations}
        if "source_file" in args and "source_line" in args:
            out.append([e.name, args["source_file"].string_value, args["source_line"].uint_value])
    return out


path = sys.argv[1]
sources = otf2_sources(path) if path.endswith(".otf2") else perfetto_sources(path)
json.dump({"sources": sources}, sys.stdout)
