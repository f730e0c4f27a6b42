"""The console's Compare in a real browser (Debian's chromium, driven by Playwright), in Korean and
in English, in a 1366 px wide window: one customer-list question asked as a planner and as their
branch manager. Each side says how many rows it holds (the branch manager sees the whole branch,
more than the planner's own customers) and which columns it sees masked, the masked-column legend
shows only on a side that masks, and every compared column is in view without scrolling. The
Korean and English screenshots are the README's docs/screenshots/compare-{ko,en}.png."""

import re

import pytest

from tests.browser.test_console_browser import browser  # noqa: F401
from tests.browser.test_operator_pages import (  # noqa: F401  (pages_site is a fixture)
    ARTIFACTS,
    LANGUAGES,
    SCREENSHOTS,
    logged_in,
    pages_site,
)
from tests.kb.conftest import expected_customer_ids

pytestmark = [pytest.mark.db, pytest.mark.slow]

PLANNER, MANAGER = "KB-P-001", "KB-M-001"
CUSTOMERS = "담당 고객 목록"
PAYMENTS = "담당 고객의 보험료 상세를 보여줘"  # the widest answer: nine columns, long labels
LIMIT = 50
WINDOW = {"width": 1366, "height": 900}
# The row count as each language writes it, plain and cut at the limit ("50건 이상 ...").
ROWS_WRITTEN = {
    "ko": (r"^(\d+)건$", r"^(\d+)건 이상 \(이후 생략\)$"),
    "en": (r"^(\d+) rows?$", r"^(\d+)\+ rows \(more not shown\)$"),
}

READ_SIDES = """sides => sides.map(side => {
  const rows = side.querySelector('.compare-rows');
  return {
    stakeholder: side.dataset.stakeholder,
    rows_text: rows.textContent.trim(),
    row_count: Number(rows.dataset.rowCount),
    truncated: rows.dataset.truncated,
    masked_text: side.querySelector('.compare-masked').textContent.trim(),
    legends: [...side.querySelectorAll('.masked-legend')].filter(p => p.offsetParent).length,
    columns: [...side.querySelectorAll('thead th')].map(th => ({
      name: th.dataset.column,
      label: th.firstChild.nodeValue.trim(),  // the words, not the lock's <title>
      masked: th.classList.contains('masked'),
    })),
    ids: [...side.querySelectorAll('tbody tr')].map(tr => tr.cells[0].textContent.trim()),
  };
})"""

# Each side's table frame (does it scroll sideways?) and its header cells, against the window.
READ_FRAMES = """sides => sides.map(side => {
  const frame = side.querySelector('.answer-frame');
  const box = frame.getBoundingClientRect();
  return {
    side: side.dataset.stakeholder,
    scroll_width: frame.scrollWidth,
    client_width: frame.clientWidth,
    left: box.left + frame.clientLeft,
    right: box.left + frame.clientLeft + frame.clientWidth,
    window: document.documentElement.clientWidth,
    headers: [...frame.querySelectorAll('thead th')].map(th => {
      const cell = th.getBoundingClientRect();
      return {column: th.dataset.column, left: cell.left, right: cell.right};
    }),
  };
})"""


def compared(browser, url: str, language: str, prompt: str):  # noqa: F811
    """The console after Compare of `prompt` as the planner and the branch manager."""
    page = logged_in(browser, url, "pages-admin", language, "/admin/registry/consoleturn/")
    page.set_viewport_size(WINDOW)
    page.select_option("select[name=server]", "kb_mcp")
    page.select_option("select[name=stakeholder]", PLANNER)
    page.select_option("select[name=compare_with]", MANAGER)
    page.fill("textarea[name=prompt]", prompt)
    page.fill("input[name=limit]", str(LIMIT))
    page.click("#compare")
    page.wait_for_selector("#comparison .compare-side table")
    return page


def clipped(page) -> list[str]:
    """The compared columns not wholly in view, each with why; none when all are."""
    out = []
    for frame in page.locator("#comparison .compare-side").evaluate_all(READ_FRAMES):
        if frame["scroll_width"] > frame["client_width"]:
            width = f"{frame['scroll_width']} > {frame['client_width']} px"
            out.append(f"{frame['side']}: its table scrolls sideways ({width})")
        for cell in frame["headers"]:
            where = f"{frame['side']} {cell['column']}"
            if cell["left"] < frame["left"] - 0.5 or cell["right"] > frame["right"] + 0.5:
                out.append(f"{where}: cut off by its frame at {frame['right']:.0f} px")
            if cell["right"] > frame["window"] + 0.5:
                out.append(f"{where}: past the window's {frame['window']} px")
    return out


def written_count(language: str, side: dict) -> int:
    """The number the side writes as its row count, in the form its `truncated` calls for."""
    plain, more = ROWS_WRITTEN[language]
    pattern = more if side["truncated"] == "yes" else plain
    found = re.match(pattern, side["rows_text"])
    assert found, f"{side['stakeholder']}: {side['rows_text']!r} is not written as {pattern}"
    return int(found.group(1))


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_compare_shows_each_sides_rows_and_masked_columns_with_every_column_in_view(
    pages_site,  # noqa: F811
    browser,  # noqa: F811
    language,
):
    page = compared(browser, pages_site, language, CUSTOMERS)
    planner, manager = page.locator("#comparison .compare-side").evaluate_all(READ_SIDES)
    assert [planner["stakeholder"], manager["stakeholder"]] == [PLANNER, MANAGER]

    # Rows: each side writes the number of rows it shows; the planner sees their own customers,
    # the branch manager the whole branch, cut at the asked limit and saying so.
    for side, stakeholder in ((planner, PLANNER), (manager, MANAGER)):
        visible = expected_customer_ids(stakeholder)
        assert side["row_count"] == written_count(language, side) == len(side["ids"])
        assert side["row_count"] == min(len(visible), LIMIT)
        assert side["truncated"] == ("yes" if len(visible) > LIMIT else "no")
        assert set(side["ids"]) <= visible
    assert 0 < planner["row_count"] < manager["row_count"]

    # Masked columns: the branch manager sees the phone number masked, the planner in full; each
    # side names what it masks by the label its table's header shows.
    def phone(side):
        return next(c for c in side["columns"] if c["name"] == "phone")

    assert phone(manager)["masked"] and not phone(planner)["masked"]
    for side in (planner, manager):
        masked = [c["label"] for c in side["columns"] if c["masked"]]
        for label in masked:
            assert label in side["masked_text"]
        unmasked = [c["label"] for c in side["columns"] if not c["masked"]]
        assert not any(label in side["masked_text"] for label in unmasked)
        # The legend of the lock mark is there only where a column is masked.
        assert side["legends"] == (1 if masked else 0)
    assert phone(manager)["label"] in manager["masked_text"]
    assert phone(planner)["label"] not in planner["masked_text"]
    assert page.locator("#compare-columns").is_visible()  # "columns only one side sees" stays

    # Layout: every column of both tables is in view at 1366 px, no table scrolls sideways.
    assert clipped(page) == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"compare-customers-{language}.png"), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#comparison").screenshot(path=str(SCREENSHOTS / f"compare-{language}.png"))
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_compare_keeps_every_column_of_a_wide_answer_in_view(pages_site, browser, language):  # noqa: F811
    """Premium payments: nine columns, the last three (amount, payment status, paid date) used to
    be cut off and need scrolling sideways."""
    page = compared(browser, pages_site, language, PAYMENTS)
    columns = page.locator("#comparison .compare-side").evaluate_all(READ_SIDES)
    assert all(len(side["columns"]) >= 8 for side in columns)
    assert clipped(page) == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # Where neither side masks a column, neither shows the legend.
    for side in columns:
        assert side["legends"] == (1 if any(c["masked"] for c in side["columns"]) else 0)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"compare-payments-{language}.png"), full_page=True)
    page.close()
