// PDF surgery over libqpdf, as a C API that Swift can call safely: every function catches
// every C++ exception and reports it as a status and a message, so none ever reaches Swift
// (where it would abort the process).
#ifndef CANVAS_PDF_SURGERY_H
#define CANVAS_PDF_SURGERY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_OK = 0,
    PS_DAMAGED = 1,      // not a PDF, or one that needs repair to be read
    PS_ENCRYPTED = 2,    // encrypted: not served
    PS_PAGE_RANGE = 3,   // no such page
    PS_BAD_OVERLAY = 4,  // the overlay is not a one-page PDF
    PS_INTERNAL = 5,     // anything else (the message says what)
    PS_IO = 6,           // a system call failed: the ps_error's code says why
    PS_TIMEOUT = 7,      // the work on this document ran past its time budget
    PS_TOO_LARGE = 8,    // what was asked for would pass the bound the caller gave
} ps_status;

typedef struct ps_document ps_document;

// What a call that failed says, in the record the caller gave it (as qpdf's C API keeps a
// failure on the handle it happened to, not in a per-thread slot): the message, and for
// PS_IO the errno of the system call that failed (0 otherwise). Every call that takes one
// fills it, clearing what an earlier call left.
typedef struct {
    int code;
    char message[1024];
} ps_error;

// A page as a viewer shows it: the visible box (CropBox within MediaBox) in default user space,
// its rotation (0, 90, 180 or 270, clockwise), UserUnit, and the display size in points
// (the box rotated and scaled by UserUnit).
typedef struct {
    double llx, lly, urx, ury;
    int rotation;
    double user_unit;
    double display_width, display_height;
} ps_page_info;

// Opens the PDF that starts `offset` bytes into the open file `fd` and runs to its end (a
// .yianazip container holds one after its metadata; a .pdf file has offset 0). The document
// reads through its own duplicate of `fd`: the caller may close `fd` at once. `name` appears
// in messages. Everything done with the document, from this open to its last write, must end
// within `budget_ms` milliseconds of the open (0: no limit), or fails with PS_TIMEOUT.
ps_status ps_open(int fd, const char *name, int64_t offset, int64_t budget_ms, ps_document **out, ps_error *error);
void ps_close(ps_document *document);

int ps_page_count(ps_document *document);
ps_status ps_page_info_at(ps_document *document, int page, ps_page_info *out, ps_error *error);

// The drawings stored with the page's ink by earlier flattens, one record per edit in the order
// made: a kind byte ('L' for the one drawing an early version kept for the whole page, 'F' for
// an edit's form, the n-th 'F' record being the n-th form), a 4-byte big-endian length, and the
// stored bytes (none for a form without a stored drawing). The caller frees *bytes with
// ps_free; *length is 0 when the page has no ink of ours. The stored drawings, decoded, come to
// at most `max_bytes` in all: past it the call stops decoding at once and fails with
// PS_TOO_LARGE (a stream deflated over and over can claim any size).
ps_status ps_page_drawing(ps_document *document, int page, size_t max_bytes, unsigned char **bytes, size_t *length, ps_error *error);
// Makes the next flatten replace earlier edits: the page stops drawing the forms at positions
// `forms` (as ps_page_drawing numbers its 'F' records), and `points`, the ink they held, comes
// off the page's count. With empty ink, the flatten only takes those edits away.
void ps_drop_forms(ps_document *document, const int *forms, size_t count, int64_t points);

// Adds ink to `page`, over its content and any ink earlier flattens put there (which stays as
// it is), and returns the bytes of an incremental update: appended to the original PDF bytes
// they make the new document. The ink is `strokes`, content-stream operators in display points
// (origin at the displayed page's top-left corner, y down; they may set the graphics state
// /CanvasMultiply, a multiply blend), then the one-page PDF `overlay` in display points (texts;
// none when its length is 0). `drawing` (the bytes of the drawing it was made from) is stored with the ink. The document handle is
// spent afterwards: close it.
ps_status ps_flatten_increment(ps_document *document, int page,
                               const unsigned char *overlay, size_t overlay_length,
                               const unsigned char *strokes, size_t strokes_length,
                               const unsigned char *drawing, size_t drawing_length,
                               unsigned char **bytes, size_t *length, ps_error *error);

// 1 when the document cannot take an appended update (it was read only after repair, or it is
// encrypted) and must be written whole with ps_flatten_rewrite.
int ps_needs_rewrite(ps_document *document);

// Adds the ink as ps_flatten_increment does, then writes the whole document (encrypted as it
// was, if it was) to `fd` at its current position. The handle is spent afterwards.
ps_status ps_flatten_rewrite(ps_document *document, int page,
                             const unsigned char *overlay, size_t overlay_length,
                             const unsigned char *strokes, size_t strokes_length,
                             const unsigned char *drawing, size_t drawing_length,
                             int fd, ps_error *error);

// The points of ink that flattening put on `page` in all (0 for a page without ink of ours, or
// with ink from before the count was kept).
int64_t ps_page_ink_points(ps_document *document, int page);

// The points of ink the next flatten adds, for the page's count.
void ps_add_ink_points(ps_document *document, int64_t points);

// The matrix (a b c d e f) from the page's ink space (display points, y up, origin at the
// displayed page's bottom-left corner) to its default user space.
ps_status ps_page_placement(ps_document *document, int page, double matrix[6], ps_error *error);
// Makes the next flatten add an annotation: `dictionary`, PDF syntax, gives its own entries
// (/Subtype, /Rect, ... in user space); the flatten adds an appearance that draws `strokes`
// and page `overlay_page` (from 0) of the PDF `overlay` as a form would (ps_flatten_increment),
// covering `box` (llx lly urx ury, in ink space) and placed by the page's matrix, and stores
// `source` with it. Annotations given the same overlay share what its pages use (a font).
ps_status ps_add_annotation(ps_document *document, const char *dictionary, size_t dictionary_length,
                            const unsigned char *strokes, size_t strokes_length, const unsigned char *overlay, size_t overlay_length,
                            int overlay_page, const unsigned char *source, size_t source_length, const double box[4], ps_error *error);
// The page's ink annotations (those carrying a stored drawing), one record each in /Annots
// order: 'A', the annotation's position in /Annots (4 bytes, big-endian), then the length and
// bytes of a JSON object of its /Subtype, /Rect, /C, /InkList, /BS, /IT, /Contents, /CA and
// digest as they are now (qpdf's JSON version 2), then the length and bytes of its stored
// drawing. With `other_ink`, other programs' /Ink annotations too, each as an 'O' record: its
// position, the JSON of its /Rect, /C, /InkList, /BS, /Border, /IT, /CA, /F, /T, /Subj, /M, /NM,
// /CreationDate, /Contents, /RC, its appearance's /BBox and /Matrix, /CanvasBridgePopup (the position of its
// /Popup) and /CanvasBridgeMultiply (true when its appearance blends by multiplying), then its
// normal appearance's content, decoded (empty when it has none). Freed with ps_free; *length
// is 0 when there are none. Bounded as ps_page_drawing: the records come to at most
// `max_bytes`, and the entries hold at most `max_numbers` numbers in all (an /InkList can list
// millions), else PS_TOO_LARGE before any is written out.
ps_status ps_page_annotations(ps_document *document, int page, size_t max_bytes, size_t max_numbers, int other_ink,
                              unsigned char **bytes, size_t *length, ps_error *error);
// Makes the next flatten take the annotations at these positions in /Annots off the page: ours,
// other programs' /Ink, and their /Popup (anything else is refused as PS_INTERNAL).
void ps_drop_annotations(ps_document *document, const int *annotations, size_t count);
// Gives the document a new time budget, from now: a save parses within a reader's budget, then
// has longer for its write.
void ps_set_budget(ps_document *document, int64_t budget_ms);

void ps_free(void *bytes);

#ifdef __cplusplus
}
#endif

#endif
