"""Loads a Perfetto trace and prints, as JSON, the slices per rank and name
and the flows, counted in SQL by trace_processor when it can be started.

trace_processor is a native binary the `perfetto` package downloads on
first use; where that download is impossible (no network), pass its path
in TRACE_PROCESSOR_SHELL, or the trace is parsed with the package's own
protobuf schema (perfetto_trace_pb2) and the same counts are made from
the parsed messages: the output says which reader was used."""
import json
import os
import sys
from collections import Counter


def by_trace_processor(path):
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    shell = os.environ.get("TRACE_PROCESSOR_SHELL")
    config = TraceProcessorConfig(bin_path=shell) if shell else TraceProcessorConfig()
    tp = TraceProcessor(trace=path, config=config)
    slices = {}
    q = tp.query("""
        select p.name as process, s.name as name, count(*) as n
        from slice s
        join thread_track tt on s.track_id = tt.id
        join thread using (utid)
        join process p using (upid)
        group by p.name, s.name""")
    for row in q:
        slices.setdefault(row.process, {})[row.name] = row.n
    flows = next(iter(tp.query("select count(*) as n from flow"))).n
    tp.close()
    return {"reader": "trace_processor", "slices": slices, "flows": flows}


def by_schema(path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    process_of_track = {}
    names = {}
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("process"):
                names[d.uuid] = d.process.process_name
    for p in trace.packet:
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread"):
            d = p.track_descriptor
            process_of_track[d.uuid] = names[d.parent_uuid]
    slices = {}
    out_ids, in_ids = Counter(), Counter()
    open_slices = Counter()
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            proc = process_of_track[e.track_uuid]
            per = slices.setdefault(proc, {})
            per[e.name] = per.get(e.name, 0) + 1
            open_slices[e.track_uuid] += 1
            out_ids.update(e.flow_ids)
            in_ids.update(e.terminating_flow_ids)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            open_slices[e.track_uuid] -= 1
            assert open_slices[e.track_uuid] >= 0, "a slice ends that never began"
    assert all(v == 0 for v in open_slices.values()), "slices left open"
    flows = sum(1 for i in out_ids if in_ids[i] == 1 and out_ids[i] == 1)
    return {"reader": "perfetto_trace_pb2", "slices": slices, "flows": flows,
            "flow_ends_without_start": sum(1 for i in in_ids if i not in out_ids)}


def main(path):
    try:
        result = by_trace_processor(path)
    except Exception as e:  # the binary could not be had or started
        result = by_schema(path)
        result["trace_processor_error"] = str(e)[:300]
    json.dump(result, sys.stdout)


main(sys.argv[1])
