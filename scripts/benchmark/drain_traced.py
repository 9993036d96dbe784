"""W1otel, what tracing costs a worker: W1's drain (K=2) of jobs that each carry a producer's trace
context, by workers without OpenTelemetry and by workers with the SDK set up as
``opentelemetry-instrument`` sets it up (a ``sitecustomize``: a TracerProvider with the SDK's
BatchSpanProcessor, its exporter discarding the spans, so that the figure is the worker's own cost
and not a collector's network), in alternation run by run. Per job: a ``process`` span with its
attributes, a parent parsed from the stored traceparent, and its share of one ``receive`` span a batch.

The difference of client CPU per job (``traced_cpu_us_job`` − ``cpu_us_job``) is what a traced job
costs a worker; the jobs/s ratio (``ratio_untraced``) what it costs a drain on this machine.
"""

from __future__ import annotations

import pathlib
import tempfile

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import BATCH, Sizes, drain_mysqlq

# A producer's span, as stored with each job by an application that traces.
TRACE_CONTEXT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

SITECUSTOMIZE = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Discard(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(Discard()))
trace.set_tracer_provider(provider)
"""


def traced_jobs(cur: object) -> None:
    cur.execute("UPDATE mysqlq_jobs SET trace_context = %s", (TRACE_CONTEXT,))  # type: ignore[attr-defined]


def w1_otel(bench: Bench, sizes: Sizes) -> list[Figure]:
    n = sizes.w1_jobs
    figure = Figure("W1otel", {"k": "2", "batch": BATCH, "n": str(n)},
                    spread=("jobs_s", "traced_jobs_s", "ratio_untraced", "tracing_cpu_us_job"))
    with tempfile.TemporaryDirectory(prefix="mysqlq-w1otel-") as site:
        (pathlib.Path(site) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        for run in range(bench.runs):
            note(f"W1otel run {run + 1}: K=2 without OpenTelemetry, then with the SDK")
            plain = drain_mysqlq(bench, f"w1otel_plain_r{run}", 2, n, after_fill=traced_jobs)
            traced = drain_mysqlq(bench, f"w1otel_traced_r{run}", 2, n, after_fill=traced_jobs,
                                  env={"PYTHONPATH": site})
            figure.add(jobs_s=plain.jobs_s, traced_jobs_s=traced.jobs_s, ratio_untraced=traced.jobs_s / plain.jobs_s,
                       cpu_us_job=plain.cpu_us_job, traced_cpu_us_job=traced.cpu_us_job,
                       tracing_cpu_us_job=traced.cpu_us_job - plain.cpu_us_job)
    return [emit(figure)]
