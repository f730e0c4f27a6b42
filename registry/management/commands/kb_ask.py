"""Ask the registered KB MCP server a question as one stakeholder, from a terminal."""

import getpass
import os
import unicodedata
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.serving import RECORD_NAME
from kb.catalogue import TOOL_DEFAULT_LIMIT
from kb.models import Stakeholder
from registry.console import ConsoleError, console_token
from registry.declarations import DEFAULT_KB_BASE_URL_ENV
from registry.mcp.contract import LIMIT_MAX, LIMIT_MIN
from registry.mcp.errors import to_public_mcp_error
from registry.models import ConsoleTurn
from registry.selectors import server_get_enabled
from registry.services import mcp_exchange_audit, mcp_exchange_run

MAX_CELL_WIDTH = 40


class Command(BaseCommand):
    help = (
        "Ask the registered KB MCP server (KB_MCP_BASE_URL, else where `make run` serves, + /mcp) "
        "a question with a stakeholder's "
        "VPD token from the preset file (owner-only, 0600), and print the answer as a table."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "question", nargs="?", default="", help="the question, e.g. 담당 고객 목록"
        )
        parser.add_argument(
            "--as", dest="stakeholder", required=True, help="stakeholder id, e.g. KB-P-001"
        )
        parser.add_argument(
            "--limit", type=int, default=TOOL_DEFAULT_LIMIT, help="rows, 1..100 (clamped)"
        )
        parser.add_argument("--server", default="kb_mcp", help="registered server id")
        parser.add_argument(
            "--presets",
            default=None,
            help="token preset file (default: settings.VPD_TOKEN_PRESETS_FILE)",
        )
        parser.add_argument(
            "--discover", action="store_true", help="only discover the server's tools"
        )

    def handle(self, *args, **options):
        # A terminal has no browser to ask: the command speaks the server's LANGUAGE_CODE.
        with translation.override(settings.LANGUAGE_CODE):
            self._ask(**options)

    def _ask(self, *, question, stakeholder, limit, server, presets, discover, **options):
        kind = ConsoleTurn.Kind.DISCOVER if discover else ConsoleTurn.Kind.CALL
        if not discover and not question.strip():
            raise CommandError(_("질문을 입력하세요."))
        prompt = None if discover else question
        audit = {"actor": f"console:{_os_user()}", "prompt": prompt}
        registered = server_get_enabled(server_id=server)
        if registered is None:
            self._refuse(
                ConsoleError(
                    _("등록되어 사용 중인 MCP 서버 %(server)s가 없습니다.")
                    % {"server": repr(server)},
                    code="server_not_registered",
                ),
                kind=kind,
                server_id=server,
                **audit,
            )
        if registered.to_declaration().is_kb and not _kb_base_url(registered):
            self._refuse(
                ConsoleError(
                    _(
                        "KB 서버가 어디에 있는지 모르므로 토큰을 보내지 않았습니다: 실행 중인 "
                        "hyperbook의 기록(%(record)s)도 %(variable)s도 없습니다. `make run`으로 "
                        "서버를 시작하거나, %(variable)s=http://127.0.0.1:PORT 처럼 서버 주소를 "
                        "지정하세요."
                    )
                    % {
                        "record": settings.VAR_DIR / RECORD_NAME,
                        "variable": registered.base_url_env or DEFAULT_KB_BASE_URL_ENV,
                    },
                    code="kb_server_unknown",
                ),
                kind=kind,
                server_id=registered.server_id,
                **audit,
            )
        try:
            token = console_token(
                stakeholder_id=stakeholder, presets_file=Path(presets) if presets else None
            )
        except ConsoleError as exc:
            self._refuse(exc, kind=kind, server_id=registered.server_id, **audit)
        person = Stakeholder.objects.filter(stakeholder_id=stakeholder).first()
        # An operator at this server's own terminal may pin a server seen for the first time.
        exchange = mcp_exchange_run(
            kind=kind,
            server=registered,
            token=token.value,
            prompt=question,
            limit=limit,
            trust_first_use=True,
            actor=None,
        )
        mcp_exchange_audit(
            exchange=exchange,
            server_id=registered.server_id,
            tool=registered.default_tool,
            token=token.value,
            stakeholder_id=token.stakeholder_id,
            stakeholder_role=person.role if person else "",
            **audit,
        )
        if exchange.error is not None:
            public = to_public_mcp_error(exchange.error)
            status = f" (HTTP {public.http_status})" if public.http_status else ""
            request_id = getattr(exchange.error, "request_id", "")
            request = f" [request id {request_id}]" if request_id else ""
            raise CommandError(f"{public.message}{status}{request}")
        if discover:
            self._print_discovery(exchange.result)
            return
        outcome = exchange.result
        if outcome.is_error:
            raise CommandError(
                _("도구 오류: %(text)s [request id %(request_id)s]")
                % {"text": outcome.text[:500], "request_id": outcome.request_id}
            )
        self._print_answer(outcome)

    def _refuse(self, refusal: ConsoleError, *, kind, server_id, actor, prompt):
        """Nothing was sent: say why, and keep it on the record."""
        mcp_exchange_audit(
            exchange=None,
            kind=kind,
            server_id=server_id,
            tool="",
            actor=actor,
            prompt=prompt,
            refusal=refusal,
        )
        raise CommandError(str(refusal))

    def _print_discovery(self, discovery):
        issued = _("예") if discovery.session_issued else _("아니요")
        self.stdout.write(
            _("서버: %(server)s (%(endpoint)s)")
            % {"server": discovery.server_id, "endpoint": discovery.endpoint}
        )
        self.stdout.write(_("프로토콜 버전: %(version)s") % {"version": discovery.protocol_version})
        self.stdout.write(_("세션 발급: %(issued)s") % {"issued": issued})
        self.stdout.write(_("도구: %(tools)s") % {"tools": ", ".join(discovery.tool_names)})
        self.stdout.write(
            _("허용 도구: %(tool)s (고정 상태: %(pin)s)")
            % {"tool": discovery.tool, "pin": discovery.pin_state}
        )

    def _print_answer(self, result):
        answer = result.answer or {}
        interpretation = answer.get("interpretation") or {}
        summary = interpretation.get("summary") or ""
        stakeholder = answer.get("stakeholder") or {}
        self.stdout.write(_("해석: %(summary)s") % {"summary": summary})
        self.stdout.write(
            _("조회자: %(id)s (%(role)s), 기준일 %(as_of)s")
            % {
                "id": stakeholder.get("id", ""),
                "role": stakeholder.get("role", ""),
                "as_of": answer.get("as_of", ""),
            }
        )
        help_ = interpretation.get("help") or {}
        if help_.get("message"):
            self.stdout.write(help_["message"])
            for example in help_.get("examples") or []:
                self.stdout.write(f"  - {example}")
        columns = answer.get("columns") or []
        rows = answer.get("rows") or []
        if columns:
            self.stdout.write("")
            self.stdout.write(_table(columns, rows, set(answer.get("masked_columns") or [])))
        rows_count = result.row_count or 0
        shown = ngettext("%(n)s건", "%(n)s건", rows_count) % {"n": rows_count}
        more = _(" (더 있음)") if answer.get("truncated") else ""
        self.stdout.write("")
        self.stdout.write(
            f"{shown}{more} · limit {result.limit} "
            f"({LIMIT_MIN}~{LIMIT_MAX}) · request id {result.request_id}"
        )
        if answer.get("masked_columns"):
            masked = ", ".join(answer["masked_columns"])
            self.stdout.write(_("마스킹된 열: %(columns)s") % {"columns": masked})


def _kb_base_url(server) -> str:
    """The KB server's base URL as the client resolves it: the setting, else the environment."""
    name = server.base_url_env or DEFAULT_KB_BASE_URL_ENV
    return str(getattr(settings, name, "") or os.environ.get(name, "")).strip()


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "unknown"


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _fit(text: str, width: int) -> str:
    if _width(text) > MAX_CELL_WIDTH:
        while _width(text) > MAX_CELL_WIDTH - 1:
            text = text[:-1]
        text += "…"
    return text + " " * (width - _width(text))


def _cell(value) -> str:
    if value is None:
        return "-"
    return str(value).replace("\n", " ")


def _table(columns: list[dict], rows: list[dict], masked: set[str]) -> str:
    """Columns labelled as the answer labels them (and their ids); wide characters count two."""
    names = [c.get("name", "") for c in columns]
    headers = [
        f"{c.get('label') or c.get('name', '')}({c.get('name', '')})"
        + ("*" if c.get("name") in masked else "")
        for c in columns
    ]
    cells = [[_cell(row.get(name)) for name in names] for row in rows]
    widths = [
        min(MAX_CELL_WIDTH, max([_width(h)] + [_width(r[i]) for r in cells]))
        for i, h in enumerate(headers)
    ]
    lines = [" | ".join(_fit(h, w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    for row in cells:
        lines.append(" | ".join(_fit(v, w) for v, w in zip(row, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)
