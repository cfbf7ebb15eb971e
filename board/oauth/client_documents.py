# TEMPORARY STUB (replaced by the real module)
from mcp.shared.auth import OAuthClientInformationFull
from urllib.parse import urlsplit


class ClientDocumentError(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


def is_document_client_id(client_id: str) -> bool:
    p = urlsplit(client_id)
    return p.scheme == "https" and bool(p.hostname) and p.path not in ("", "/")


class ClientDocuments:
    def __init__(self, settings):
        self.settings = settings

    async def resolve(self, client_id):
        raise ClientDocumentError("not implemented")

    async def aclose(self):
        pass
