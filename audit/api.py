"""Read-only audit API for SIEM pulls: filters named after the fields, cursor pagination; the
signed checkpoints and the keys that verify them."""

import datetime as dt

import django_filters
from django import forms
from django.http import StreamingHttpResponse
from rest_framework import exceptions, permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import proofs, selectors
from audit.downloads import event_list_download
from audit.export import ExportError
from audit.models import AuditCheckpoint, AuditEvent, Delivery
from audit.services import audit_change
from core.groups import AUDITORS, MCP_ADMINS


class AuditorsAndAdmins(permissions.BasePermission):
    message = "Only auditors and administrators may read the audit log."

    def has_permission(self, request, view):
        user = request.user
        if not user or not user.is_authenticated:
            return False
        return user.is_superuser or user.groups.filter(name__in=[AUDITORS, MCP_ADMINS]).exists()


class AuditEventSerializer(serializers.ModelSerializer):
    delivery_state = serializers.SerializerMethodField()
    delivery_attempts = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = [f.name for f in AuditEvent._meta.concrete_fields] + [
            "delivery_state",
            "delivery_attempts",
        ]
        read_only_fields = fields

    def get_delivery_state(self, event) -> str:
        return selectors.event_delivery(event).state

    def get_delivery_attempts(self, event) -> int:
        return selectors.event_delivery(event).attempts


class StorableDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 moment that can be expressed in UTC (0001-01-01 at +14:00 cannot), as every
    database compares it."""

    def to_python(self, value):
        moment = super().to_python(value)
        if moment is not None:
            try:
                moment.astimezone(dt.UTC)
            except OverflowError:
                raise forms.ValidationError("Outside the years 1 to 9999 in UTC.") from None
        return moment


class StorableDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = StorableDateTimeField


class AuditEventFilter(django_filters.FilterSet):
    occurred_after = StorableDateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    occurred_before = StorableDateTimeFilter(field_name="occurred_at", lookup_expr="lt")
    delivery_state = django_filters.ChoiceFilter(
        choices=Delivery.State.choices,
        method=lambda queryset, name, value: selectors.with_delivery_state(queryset, value),
    )
    sequence_after = django_filters.NumberFilter(field_name="sequence", lookup_expr="gt")

    class Meta:
        model = AuditEvent
        fields = [
            "request_id",
            "client_request_id",
            "outcome",
            "http_status",
            "action",
            "stakeholder_id",
            "tool",
            "delegation_id",
            "rpc_method",
            "source",
        ]


class IntegerCursor(CursorPagination):
    """A cursor over an integer column: one that does not decode, or whose position is not such an
    integer, is the client's mistake (400), never a query the database fails on."""

    invalid_cursor_message = "Invalid cursor."

    def decode_cursor(self, request):
        invalid = exceptions.ValidationError({self.cursor_query_param: self.invalid_cursor_message})
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise invalid from None
        position = cursor.position if cursor else None
        if position is not None and not (
            position.isascii() and position.isdigit() and int(position) < 2**63
        ):
            raise invalid
        return cursor


class AuditEventCursor(IntegerCursor):
    ordering = "-sequence"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = AuditEventSerializer
    permission_classes = [AuditorsAndAdmins]
    filterset_class = AuditEventFilter
    pagination_class = AuditEventCursor
    lookup_field = "id"

    def get_queryset(self):
        return selectors.audit_events_visible()

    @action(detail=False, url_path="export", pagination_class=None)
    def export(self, request):
        """The events the filters choose, as a file `python -m audit.verify` proves: all of them
        with the checkpoints (no filter), else each proven on its own (audit.downloads)."""
        filtered = any(name in request.query_params for name in self.filterset_class.base_filters)
        events = self.filter_queryset(self.get_queryset())
        try:
            lines = event_list_download(events, filtered=filtered)
        except ExportError as exc:
            raise exceptions.ValidationError({"detail": str(exc)}) from None
        audit_change(
            action=AuditEvent.Action.AUDIT_EXPORTED,
            actor=request.user,
            target="audit_events",
            before=None,
            after={
                "filter": request.query_params.urlencode() if filtered else "",
                "format": "proof_bundle" if filtered else "jsonl",
                "via": "api",
            },
        )
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
        response["Cache-Control"] = "no-store"
        return response


class AuditCheckpointSerializer(serializers.ModelSerializer):
    delivery_state = serializers.SerializerMethodField()

    class Meta:
        model = AuditCheckpoint
        fields = [
            "number",
            "source",
            "origin",
            "sequence",
            "hash",
            "head_hash",
            "prev_hash",
            "key_id",
            "created_at",
            "note",
            "delivery_state",
        ]
        read_only_fields = fields

    def get_delivery_state(self, checkpoint) -> str:
        delivery = getattr(checkpoint, "delivery", None)
        return delivery.state if delivery else Delivery.State.PENDING


class AuditCheckpointCursor(IntegerCursor):
    ordering = "-number"
    page_size = 100


class AuditCheckpointViewSet(viewsets.ReadOnlyModelViewSet):
    """Signed checkpoints, newest first; `latest/` is the newest one alone."""

    serializer_class = AuditCheckpointSerializer
    permission_classes = [AuditorsAndAdmins]
    pagination_class = AuditCheckpointCursor
    lookup_field = "number"
    filterset_fields = ["source"]

    def get_queryset(self):
        return AuditCheckpoint.objects.select_related("delivery")

    @action(detail=False, url_path="consistency-proof")
    def consistency_proof(self, request):
        """`?from=M&to=N`: the RFC 6962 proof that the log at size M is a prefix of it at N."""
        params = request.query_params
        old, new = _size(params, "from"), _size(params, "to")
        return _proof_response(
            lambda: proofs.tree_consistency(old=old, new=new, source=_source(params))
        )

    @action(detail=False)
    def latest(self, request):
        checkpoint = selectors.latest_checkpoint(request.query_params.get("source", "hyperbook"))
        if checkpoint is None:
            return Response({"detail": "no checkpoint has been signed yet"}, status=404)
        return Response(self.get_serializer(checkpoint).data)


class InclusionProofView(APIView):
    """`GET /api/audit-events/<sequence>/inclusion-proof/?tree_size=N`: the event's RFC 6962
    inclusion proof in the tree of the checkpoint signed at size N (the latest without it), and
    that checkpoint's signed note."""

    permission_classes = [AuditorsAndAdmins]

    def get(self, request, sequence: int):
        params = request.query_params
        size = _size(params, "tree_size") if "tree_size" in params else None
        return _proof_response(
            lambda: proofs.event_inclusion(
                sequence=sequence, tree_size=size, source=_source(params)
            )
        )


def _size(params, name: str) -> int:
    value = params.get(name, "")
    if not (value.isascii() and value.isdigit() and 0 < int(value) < 2**63):
        raise exceptions.ValidationError({name: "A tree size: a positive whole number."})
    return int(value)


def _source(params) -> str:
    return params.get("source", "hyperbook")[:32]


def _proof_response(make) -> Response:
    try:
        return Response(make())
    except proofs.ProofError as exc:
        return Response({"detail": str(exc)}, status=exc.status)


class VerifierKeySerializer(serializers.Serializer):
    verifier_key = serializers.CharField()
    key_id = serializers.CharField()
    name = serializers.CharField()
    first_used_at = serializers.DateTimeField(allow_null=True)
    retired_at = serializers.DateTimeField(allow_null=True)
    last_size = serializers.IntegerField(allow_null=True)
    verifier_key_with_range = serializers.CharField()
    current = serializers.BooleanField()
    trusted = serializers.BooleanField()


class VerifierKeysView(APIView):
    """Every key that has signed checkpoints (public halves), for `python -m audit.verify`."""

    permission_classes = [AuditorsAndAdmins]
    serializer_class = VerifierKeySerializer

    def get(self, request):
        return Response(VerifierKeySerializer(selectors.signing_keys(), many=True).data)
