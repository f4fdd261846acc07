"""Build samples/corpus/operations-runbook.pdf, the PDF of the demo corpus.

The PDF is generated rather than hand-made so it can be reviewed as text and rebuilt byte for byte:
the creation date and producer are fixed, so the same fpdf2 version always writes the same bytes.
Each topic starts on its own page, which lets the demo check that citations carry the right page.

Usage: python samples/build_runbook_pdf.py [output.pdf]   (needs fpdf2, a dev dependency)
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF

OUTPUT = Path(__file__).parent / "corpus" / "operations-runbook.pdf"
TITLE = "citewise operations runbook"
CREATED = datetime(2026, 1, 15, 9, 0, 0, tzinfo=UTC)

# One entry per page: (heading, blocks). A block is ("h", text) for a subheading, ("p", text) for a
# paragraph, or ("c", text) for a command line. Text must stay within latin-1: the core fonts have no
# other glyphs, and plain ASCII keeps the extracted text identical to the source.
PAGES: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "1. Overview and on-call",
        [
            (
                "p",
                "This runbook is for the engineer on call for citewise in the dev and prod environments. "
                "Each page covers one kind of incident. Start here, then turn to the page that matches "
                "the alarm.",
            ),
            ("h", "What runs where"),
            (
                "p",
                "Three Lambda functions do the work. The ingest function reads S3 notifications from an "
                "SQS queue, then parses, chunks, embeds and indexes each document. The query function "
                "serves /v1/query and /v1/search. The documents function serves /v1/documents and "
                "/v1/uploads. State lives in three places: the S3 bucket holds the original files under "
                "tenants/{tenant_id}/, the DynamoDB registry holds the status of every document, and "
                "OpenSearch holds the chunks and their vectors. Amazon Bedrock provides the embedding "
                "model and the answer model.",
            ),
            ("h", "Alarms"),
            (
                "p",
                "Each environment has one CloudWatch dashboard and four alarms: messages waiting in the "
                "ingestion DLQ, errors in any function, the rate of 5xx responses from API Gateway, and "
                "p99 latency of /v1/query. Alarms in prod page the on-call engineer; alarms in dev only "
                "post to the team channel.",
            ),
            ("h", "Severity"),
            (
                "p",
                "SEV1: the API is unavailable for all tenants, or one tenant may have seen another "
                "tenant's data. SEV2: ingestion has stalled, or latency has been above target for more "
                "than 30 minutes. SEV3: the documents of a single tenant fail to ingest.",
            ),
            (
                "p",
                "Treat any report of cross-tenant data exposure as SEV1, even if it is unconfirmed. Do "
                "not try to reproduce it with real customer documents; page the security contact and "
                "preserve the logs.",
            ),
            ("h", "First five minutes"),
            (
                "p",
                "Open the dashboard and note when the metric changed. Check the CloudFormation events "
                "of the stack for a deploy at that time, and the AWS Health Dashboard for Bedrock, "
                "OpenSearch or Lambda events in the region. Every log line is structured JSON with the "
                "request id and tenant id, and never contains document text, so a CloudWatch Logs "
                "Insights query on request_id finds everything one failing request did. If a deploy "
                "caused the problem, roll back by deploying the previous commit with make deploy.",
            ),
        ],
    ),
    (
        "2. Ingestion failures and the dead-letter queue",
        [
            (
                "p",
                "The ingest function handles each SQS message on its own and reports partial batch "
                "failures, so one bad document never blocks the others in its batch.",
            ),
            ("h", "Two kinds of failure"),
            (
                "p",
                "Permanent failures come from the document itself: a format citewise cannot parse, a "
                "corrupt or empty file, or a file over the configured size or page limit. The ingest "
                "function marks the document FAILED in the registry with the error code and consumes "
                "the message; retrying would not help. The tenant sees the status and the error through "
                "GET /v1/documents and must replace the file.",
            ),
            (
                "p",
                "Transient failures come from a dependency: Bedrock throttling or errors, OpenSearch "
                "rejecting bulk writes or timing out, or a function timeout. The record fails, SQS "
                "makes it visible again after the visibility timeout, and after the maximum number of "
                "receives the message moves to the dead-letter queue. Any message in the dead-letter "
                "queue raises the DLQ alarm.",
            ),
            (
                "p",
                "When documents land in the dead-letter queue, find and fix the cause first, then redrive "
                "the messages from the dead-letter queue back to the ingestion queue. Redriving before "
                "the cause is fixed only sends the messages round the same loop.",
            ),
            ("h", "Redrive procedure"),
            (
                "p",
                "1. Find the cause. Run a Logs Insights query on the ingest function log group for "
                "level ERROR in the alarm window and group the results by error code. "
                "EMBEDDING_SERVICE_ERROR or THROTTLED points at Bedrock quotas; SEARCH_BACKEND_ERROR "
                "points at OpenSearch (see page 3).",
            ),
            (
                "p",
                "2. Fix it. Wait for a Bedrock throttling burst to pass or raise the quota, restore "
                "OpenSearch health, or roll back a bad deploy.",
            ),
            ("p", "3. Redrive at a moderate rate, so the replay does not trigger the same throttling:"),
            (
                "c",
                "aws sqs start-message-move-task --source-arn $DLQ_ARN --destination-arn $QUEUE_ARN "
                "--max-number-of-messages-per-second 10",
            ),
            (
                "p",
                "Follow progress with aws sqs list-message-move-tasks --source-arn $DLQ_ARN, or use "
                "Start DLQ redrive in the SQS console. Redriving is safe: ingestion is idempotent by "
                "tenant, key and version, and a message for an object that has since been deleted or "
                "replaced is skipped.",
            ),
            (
                "p",
                "4. Verify that the DLQ depth is back to zero and that the affected documents show "
                "INDEXED in the registry.",
            ),
            (
                "p",
                "Do not purge the dead-letter queue to silence the alarm: the messages are the only "
                "record of which objects still need indexing. They expire after the retention period "
                "of the queue (at most 14 days in SQS), so redrive before then.",
            ),
        ],
    ),
    (
        "3. Search latency and OpenSearch scaling",
        [
            (
                "p",
                "The latency alarm fires when the p99 latency of /v1/query stays above its threshold. "
                "The query function records three timings per request as metrics: embedding the "
                "question, searching the index, and generating the answer. Look at which one moved "
                "before changing anything.",
            ),
            ("h", "Generation is slow"),
            (
                "p",
                "Generation usually takes most of the time of /v1/query, and /v1/search does not "
                "include it. If only generation slowed down, the cause is Bedrock: check the "
                "throttling and latency metrics of the answer model. Fewer sources per answer "
                "(max_sources) shorten the prompt and the wait.",
            ),
            ("h", "Search is slow on a managed domain"),
            (
                "p",
                "Check SearchLatency, CPUUtilization, JVMMemoryPressure, ThreadpoolSearchQueue and "
                "ThreadpoolSearchRejected for the domain. CPU above 80 percent for long periods means "
                "the domain needs more or larger data nodes. JVM memory pressure above 85 percent means "
                "larger instances. k-NN graphs live in native memory outside the JVM heap: if "
                "KNNCircuitBreakerTriggered is set or KNNGraphMemoryUsage is near the limit, graphs are "
                "being evicted and reloaded, and the domain needs more memory.",
            ),
            (
                "p",
                "Replicas spread read load across nodes. Adding a replica roughly doubles search "
                "capacity for the index but needs enough data nodes to hold the copies. Change the "
                "instance type, node count or replica count in the environment's context in cdk.json "
                "and run make deploy ENV=prod. A change of instance type starts a blue/green deployment "
                "of the domain that can take an hour; schedule it outside peak traffic.",
            ),
            ("h", "Search is slow on OpenSearch Serverless"),
            (
                "p",
                "Serverless scales search OCUs on its own, but only up to the maximum search capacity "
                "set for the account. If search OCUs sit at that maximum while latency climbs, raise "
                "the limit. Indexing OCUs are counted separately, so a large ingestion run does not "
                "take capacity from search.",
            ),
            ("h", "One tenant is slow"),
            (
                "p",
                "All tenants share one index by default. A tenant with far more chunks than the rest "
                "can be moved to an index of its own, which keeps its shards and its load apart from "
                "the others without any change to the API. Large top_k values also make every search "
                "more expensive; the API caps top_k at 50.",
            ),
        ],
    ),
    (
        "4. Cost and re-embedding",
        [
            ("h", "Where the money goes"),
            (
                "p",
                "OpenSearch is usually the largest fixed cost: instance hours on a managed domain, or "
                "OCU hours on Serverless, which bills a minimum number of OCUs even when idle. Bedrock "
                "is the largest variable cost. Ingestion pays embedding tokens once per new or changed "
                "chunk. Each query pays embedding tokens for the question and answer-model tokens for "
                "the prompt and the answer; the prompt is mostly the retrieved sources, so its size "
                "grows with max_sources and the chunk size. Lambda, S3, SQS and DynamoDB are small in "
                "comparison.",
            ),
            (
                "p",
                "The functions publish token counts per tenant as metrics, which is enough to see "
                "which tenant drives the bill. To cut cost, lower max_sources, choose a cheaper answer "
                "model, and destroy dev environments that nobody is using.",
            ),
            ("h", "Vector reuse"),
            (
                "p",
                "Every chunk carries a hash of its content. When a document is replaced, chunks whose "
                "hash is unchanged keep their stored vectors, so editing one section of a long "
                "document pays only for the chunks that changed. Reuse works only within one vector "
                "space: it does not carry over to a new embedding model.",
            ),
            ("h", "Re-embedding after a model change"),
            (
                "p",
                "Vectors from two embedding models cannot be compared, and the index refuses vectors "
                "from a model other than the one it was built with. Changing the embedding model, or "
                "the vector dimension of the same model, therefore means re-embedding every chunk of "
                "every tenant into a new index.",
            ),
            (
                "p",
                "1. Estimate the cost: the number of chunks in the index times the average tokens per "
                "chunk, times the model's price per 1,000 input tokens.",
            ),
            (
                "p",
                "2. Create the new index alongside the old one, with the new model id and a new index "
                "name in the environment's context.",
            ),
            (
                "p",
                "3. Replay every object in the bucket through the ingestion pipeline into the new "
                "index. Run it at a rate the Bedrock quota allows; the old index keeps serving queries "
                "meanwhile.",
            ),
            (
                "p",
                "4. Compare the document and chunk counts of the two indexes, then switch the query "
                "function to the new model and index in one deploy, since the query embedding must "
                "come from the same model as the indexed vectors.",
            ),
            ("p", "5. Keep the old index for a few days in case of rollback, then delete it."),
        ],
    ),
    (
        "5. Tenant offboarding and deletion",
        [
            (
                "p",
                "Offboarding removes every copy of a tenant's data: files, registry entries, chunks, "
                "vectors and users. Work from a ticket that names the tenant id and records who "
                "approved the deletion, and follow the steps in order.",
            ),
            (
                "p",
                "1. Stop access. Disable the tenant's Cognito users with aws cognito-idp "
                "admin-disable-user, or remove the tenant's IAM principals from the principal map. "
                "Tokens already issued stay valid until they expire (one hour by default), so wait that "
                "long before deleting anything.",
            ),
            ("p", "2. Export, if the contract asks for it:"),
            ("c", "aws s3 sync s3://$BUCKET/tenants/$TENANT_ID/ ./export-$TENANT_ID/"),
            (
                "p",
                "3. Delete the files. Each ObjectRemoved notification makes the ingest function delete "
                "the document's chunks and its registry entry, so deleting the prefix removes the rest:",
            ),
            ("c", "aws s3 rm s3://$BUCKET/tenants/$TENANT_ID/ --recursive"),
            (
                "p",
                "If the bucket is versioned, aws s3 rm only adds delete markers. Also delete the "
                "noncurrent versions under the prefix, for example with a lifecycle rule scoped to "
                "tenants/$TENANT_ID/, or earlier versions of every file remain.",
            ),
            (
                "p",
                "4. Verify. Wait until the ingestion queue is empty, then check that the registry has "
                "no entries for the tenant and that a _count query on the index with a term filter on "
                "tenant_id returns 0. A tenant with an index of its own is simpler: delete that index.",
            ),
            (
                "p",
                "5. Delete the users with aws cognito-idp admin-delete-user and remove the tenant from "
                "any configuration that names it.",
            ),
            ("h", "Backups"),
            (
                "p",
                "Automated OpenSearch snapshots and DynamoDB point-in-time recovery still hold the "
                "tenant's data until they age out; point-in-time recovery keeps at most 35 days. Write "
                "in the ticket the date after which no copy remains, and tell the customer that date.",
            ),
            ("h", "What not to do"),
            (
                "p",
                "Do not delete the tenant's chunks from the index by hand while its files remain in "
                "S3: the registry would still list the documents, and the next notification for any "
                "of those files would index it again. Always delete through the bucket.",
            ),
        ],
    ),
]


class RunbookPDF(FPDF):
    """A4 pages with a page-number footer; headings and body in the core Helvetica font."""

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", size=8)
        self.cell(0, 10, f"{TITLE} - page {self.page_no()}", align="C")


def build() -> bytes:
    """Render every topic on its own page and return the PDF bytes."""
    pdf = RunbookPDF(format="A4")
    pdf.set_margins(left=20, top=20, right=20)
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_title(TITLE)
    pdf.set_author("citewise platform team")
    pdf.set_subject("Operating citewise: on-call, ingestion, search, cost and tenant offboarding")
    pdf.set_creator("samples/build_runbook_pdf.py")
    pdf.set_producer("fpdf2")
    pdf.set_lang("en")
    pdf.set_creation_date(CREATED)

    for number, (heading, blocks) in enumerate(PAGES, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=16)
        pdf.multi_cell(0, 8, heading, align="L", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
        for kind, text in blocks:
            text.encode("latin-1")  # fail the build on any character the core font cannot draw
            if kind == "h":
                pdf.ln(2)
                pdf.set_font("Helvetica", style="B", size=12)
                pdf.multi_cell(0, 6, text, align="L", new_x="LMARGIN", new_y="NEXT")
                pdf.ln(1)
            elif kind == "c":
                pdf.set_font("Helvetica", size=9.5)
                pdf.set_x(pdf.l_margin + 6)
                pdf.multi_cell(pdf.epw - 6, 5, text, align="L", new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
            else:
                pdf.set_font("Helvetica", size=10.5)
                pdf.multi_cell(0, 5.2, text, align="L", new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
        if pdf.page_no() != number:
            raise SystemExit(f"topic {heading!r} overflowed its page: shorten it")
    return bytes(pdf.output())


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT
    data = build()
    out.write_bytes(data)
    print(f"wrote {out} ({len(data)} bytes, {len(PAGES)} pages)")


if __name__ == "__main__":
    main()
