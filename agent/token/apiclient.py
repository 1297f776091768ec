"""TokenRequests over the agent's API client: `api_requester(client)` is the token manager's Requester.

It POSTs the TokenRequest to `serviceaccounts/<name>/token` as the node (NodeRestriction lets a node ask
only for pods bound to it) and reads `status.token` and `status.expirationTimestamp` from the answer.
"""

from __future__ import annotations

import datetime

from agent.token.manager import IssuedToken, Requester, TokenError, TokenSpec
from kubenode.kubeclient import ApiError, KubeClient
from kubenode.kubeclient.client import Resource

SERVICEACCOUNTS = Resource("serviceaccounts", "ServiceAccount")


def api_requester(client: KubeClient) -> Requester:
    def request(namespace: str, account: str, spec: TokenSpec) -> IssuedToken:
        try:
            answer = client.create(SERVICEACCOUNTS, spec.body(), namespace, name=account, subresource="token")
        except ApiError as exc:  # the server's own words, as the kubelet's event quotes them
            raise TokenError(exc.message) from None
        status = answer.get("status") or {}
        token, expiry = status.get("token"), status.get("expirationTimestamp")
        if not isinstance(token, str) or not token or not isinstance(expiry, str):
            raise TokenError(f"the TokenRequest answer for {namespace}/{account} has no token")
        expires = datetime.datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp()
        lifetime = (answer.get("spec") or {}).get("expirationSeconds") or spec.expiration_seconds
        return IssuedToken(token, expires, float(lifetime))

    return request
