"""Python handlers of the document-processing DAG (``examples/dags/documents.json``).

A DAG node's function gets its params as keyword arguments and, when it takes an
``upstream`` argument, the results of its direct upstream nodes that succeeded:
``{"classify": {"type": "invoice", ...}}``. Its return value is its result, which its
downstream nodes receive and which conditions test.
"""

from pgsched import App

app = App()  # @app.node: functions DAG nodes may run (the DAG file defines the nodes)

KINDS = ("invoice", "receipt", "ticket")


@app.node()
def classify(document: str) -> dict:
    """Say what a document is, from its name (a stand-in for a real classifier)."""
    name = document.lower()
    kind = next((k for k in KINDS if k in name), "other")
    print(f"classified {document} as {kind}")
    return {"type": kind, "document": document}


@app.node()
def book_invoice(upstream: dict, ledger: str = "accounts-payable", **_: object) -> dict:
    """Book an invoice that ``classify`` recognised."""
    document = upstream["classify"]["document"]
    print(f"booking {document} in {ledger}")
    return {"booked": document, "ledger": ledger}
