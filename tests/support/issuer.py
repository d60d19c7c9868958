"""A real, local OAuth issuer for the tests: keys generated here, its RFC 8414 metadata and
JWKS served over HTTP on a free loopback port, and access tokens signed with PyJWT.

Only what a resource server sees of an authorization server (metadata, JWKS, signed JWTs); the
authorization-code flow itself is the client's business and not under test here.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


class LocalIssuer:
    def __init__(self) -> None:
        self._keys: dict[str, Any] = {}
        self.fetches = 0  # JWKS downloads served (the cache and the rotation are measured)
        self.down = False  # answer 503 to everything (stale-if-error)
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if issuer.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                if self.path == "/.well-known/oauth-authorization-server":
                    body = issuer.metadata()
                elif self.path == "/jwks.json":
                    issuer.fetches += 1
                    body = issuer.jwks()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.rotate("k1")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def rotate(self, kid: str, *, kind: str = "rsa") -> None:
        """A new signing key, published next to the old ones."""
        if kind == "ec":
            self._keys[kid] = ec.generate_private_key(ec.SECP256R1())
        else:
            self._keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def retire(self, kid: str) -> None:
        del self._keys[kid]

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks.json",
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self._keys.items():
            algo = ECAlgorithm if isinstance(key, ec.EllipticCurvePrivateKey) else RSAAlgorithm
            jwk = json.loads(algo.to_jwk(key.public_key()))
            jwk.update(kid=kid, use="sig")
            keys.append(jwk)
        return {"keys": keys}

    def token(
        self,
        sub: str,
        audience: str,
        *,
        scope: str = "",
        lifetime_s: float = 300,
        issuer: str | None = None,
        kid: str = "k1",
        key: Any = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.url,
            "sub": sub,
            "aud": audience,
            "iat": now,
            "exp": now + int(lifetime_s),
            **claims,
        }
        if scope:
            payload["scope"] = scope
        signing = key if key is not None else self._keys[kid]
        alg = "ES256" if isinstance(signing, ec.EllipticCurvePrivateKey) else "RS256"
        return jwt.encode(payload, signing, algorithm=alg, headers={"kid": kid})
