"""The insurance knowledge base (the demo dataset's tables) and its VPD principals.

Reads of customers, contracts and premium payments go through the data layer (kb.vpd), which applies
the stakeholder's row and column policy; nothing else queries these tables for answers.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Branch(models.Model):
    branch_id = models.CharField(_("지점 ID"), max_length=16, primary_key=True)
    branch_name = models.CharField(_("지점명"), max_length=64)
    region = models.CharField(_("지역"), max_length=32)

    class Meta:
        ordering = ["branch_id"]
        verbose_name = _("지점")
        verbose_name_plural = pgettext_lazy("plural", "지점")

    def __str__(self) -> str:
        return f"{self.branch_name} ({self.branch_id})"


class Stakeholder(models.Model):
    """A KB_STAKEHOLDERS row: the user on whose behalf a VPD token acts."""

    class Role(models.TextChoices):
        PLANNER = "planner", _("설계사")
        BRANCH_MANAGER = "branch_manager", _("지점장")
        HQ_ANALYST = "hq_analyst", _("본사 분석")

    class Status(models.TextChoices):
        ACTIVE = "active", _("활성")
        SUSPENDED = "suspended", _("정지")

    stakeholder_id = models.CharField(_("관계자 ID"), max_length=16, primary_key=True)
    name = models.CharField(_("이름"), max_length=64)
    # Not limited to Role's choices at the database level: an unknown role must be representable
    # so that the policy can refuse it (fail closed) rather than the loader silently dropping it.
    role = models.CharField(_("역할"), max_length=32)
    branch = models.ForeignKey(
        Branch, on_delete=models.PROTECT, null=True, blank=True, verbose_name=_("지점")
    )
    status = models.CharField(_("상태"), max_length=16, default=Status.ACTIVE)

    class Meta:
        ordering = ["stakeholder_id"]
        verbose_name = _("관계자 (VPD 주체)")
        verbose_name_plural = pgettext_lazy("plural", "관계자 (VPD 주체)")

    def __str__(self) -> str:
        return f"{self.get_role_label()} {self.stakeholder_id}"

    def get_role_label(self) -> str:
        return str(dict(self.Role.choices).get(self.role, self.role))

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class Product(models.Model):
    product_code = models.CharField(_("상품 코드"), max_length=16, primary_key=True)
    product_name = models.CharField(_("상품명"), max_length=64)
    category = models.CharField(_("분류"), max_length=32)
    term_years = models.PositiveSmallIntegerField(_("보험 기간(년)"))

    class Meta:
        ordering = ["product_code"]
        verbose_name = _("보험 상품")
        verbose_name_plural = pgettext_lazy("plural", "보험 상품")

    def __str__(self) -> str:
        return self.product_name


class Customer(models.Model):
    customer_id = models.CharField(_("고객 ID"), max_length=16, primary_key=True)
    customer_name = models.CharField(_("고객명"), max_length=64)
    birth_date = models.DateField(_("생년월일"))
    gender = models.CharField(_("성별"), max_length=1)
    phone = models.CharField(_("전화번호"), max_length=20)
    rrn = models.CharField(_("주민등록번호"), max_length=14)
    planner = models.ForeignKey(
        Stakeholder, on_delete=models.PROTECT, related_name="customers", verbose_name=_("설계사")
    )
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, verbose_name=_("지점"))
    grade = models.CharField(_("등급"), max_length=16)
    joined_on = models.DateField(_("가입일"))

    class Meta:
        ordering = ["customer_id"]
        indexes = [models.Index(fields=["branch", "planner"])]
        verbose_name = _("고객")
        verbose_name_plural = pgettext_lazy("plural", "고객")

    def __str__(self) -> str:
        # Only the id: a name here would bypass the column policy wherever the object is printed.
        return self.customer_id


class Contract(models.Model):
    contract_id = models.CharField(_("계약 ID"), max_length=16, primary_key=True)
    customer = models.ForeignKey(
        Customer, on_delete=models.PROTECT, related_name="contracts", verbose_name=_("고객")
    )
    product = models.ForeignKey(Product, on_delete=models.PROTECT, verbose_name=_("상품"))
    status = models.CharField(_("계약 상태"), max_length=8)
    start_date = models.DateField(_("계약일"))
    end_date = models.DateField(_("만기일"))
    monthly_premium = models.PositiveIntegerField(_("월 보험료"))
    sum_insured = models.PositiveBigIntegerField(_("보험 가입금액"))
    payment_day = models.PositiveSmallIntegerField(_("납입일"))

    class Meta:
        ordering = ["contract_id"]
        indexes = [models.Index(fields=["status"]), models.Index(fields=["end_date"])]
        verbose_name = _("계약")
        verbose_name_plural = pgettext_lazy("plural", "계약")

    def __str__(self) -> str:
        return self.contract_id


class PremiumPayment(models.Model):
    payment_id = models.CharField(_("납입 ID"), max_length=16, primary_key=True)
    contract = models.ForeignKey(
        Contract, on_delete=models.PROTECT, related_name="payments", verbose_name=_("계약")
    )
    due_month = models.CharField(_("납입월"), max_length=7)
    due_date = models.DateField(_("납입 기일"))
    amount = models.PositiveIntegerField(_("금액"))
    status = models.CharField(_("납입 상태"), max_length=8)
    paid_date = models.DateField(_("납입일"), null=True, blank=True)

    class Meta:
        ordering = ["payment_id"]
        indexes = [models.Index(fields=["due_month", "status"])]
        verbose_name = _("보험료 납입")
        verbose_name_plural = _("보험료 납입 내역")

    def __str__(self) -> str:
        return self.payment_id
