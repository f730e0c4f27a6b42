"""Read-only audit API for SIEM pulls: filters named after the fields, cursor pagination."""

import django_filters
from rest_framework import permissions, serializers, viewsets
from rest_framework.pagination import CursorPagination

from audit import selectors
from audit.models import AuditEvent, Delivery
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


class AuditEventFilter(django_filters.FilterSet):
    occurred_after = django_filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    occurred_before = django_filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="lt")
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


class AuditEventCursor(CursorPagination):
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
