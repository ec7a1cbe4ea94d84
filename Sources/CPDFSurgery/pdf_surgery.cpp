// PDF surgery for canvas bridge: inspect pages, and put ink on one page as an incremental
// update, so the cost of a save follows the ink, not the size of the document.
//
// The ink arrives as content-stream operators for the strokes and a one-page PDF for the texts
// (Cairo's, with its font subset), both in display points. Each edit becomes one new form
// XObject, Flate-compressed, placed into the page's visible box through /Rotate and /UserUnit
// by one small content stream appended to the page's /Contents. The page's own content streams
// are kept as they are; the first edit brackets them with a `q` stream before and our first
// drawing stream after. Forms are only ever drawn from the page, never from each other, so the
// content stays flat at any number of edits, and an edit never rewrites earlier ink: the page
// lists its forms under /CanvasBridgeInk, each carrying the drawing it was made from.

#include "pdf_surgery.h"

#include <qpdf/Buffer.hh>
#include <qpdf/InputSource.hh>
#include <qpdf/Pl_Buffer.hh>
#include <qpdf/Pipeline.hh>
#include <qpdf/QPDF.hh>
#include <qpdf/QPDFExc.hh>
#include <qpdf/QPDFObjectHandle.hh>
#include <qpdf/QPDFPageDocumentHelper.hh>
#include <qpdf/QPDFPageObjectHelper.hh>
#include <qpdf/QPDFWriter.hh>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

const char *const kMarker = "/CanvasBridgeInk";
// Each edit's form is named /CanvasInk1, /CanvasInk2, ... in the page's XObject resources.
const char *const kFormPrefix = "/CanvasInk";
// The key, in an ink form's dictionary, of the drawing it was made from.
const char *const kDrawingKey = "/CanvasBridgeDrawing";
// The key, in an ink annotation, of the digest of what other programs may change in it (its
// /InkList, /Rect and /C; a text's /Rect, /C and /Contents) as written with its drawing.
const char *const kHashKey = "/CanvasBridgeHash";
// The graphics state the strokes use for a multiply blend.
const char *const kMultiplyState = "/CanvasMultiply";
// The deepest page tree read. qpdf walks the tree recursively, a stack frame per level, so a
// tree thousands of levels deep (a few MB of file) overflows a worker's stack; real documents
// are a few levels deep (PDFium stops at 1,024 as well).
const int kMaxPageTreeDepth = 1024;

struct Failure : std::runtime_error {
    ps_status status;
    int code;  // the errno of a failed system call, 0 otherwise
    Failure(ps_status status, std::string const &message, int code = 0)
        : std::runtime_error(message), status(status), code(code) {}
};

// The end of QPDFWriter's pipeline: writes to a descriptor and keeps the errno of a failed
// write, so that a full disk reaches the caller as ENOSPC rather than as qpdf's text.
class DescriptorPipeline : public Pipeline {
  public:
    explicit DescriptorPipeline(int fd) : Pipeline("document", nullptr), fd_(fd) {}

    void write(unsigned char const *data, size_t length) override {
        while (length > 0) {
            ssize_t n = ::write(fd_, data, length);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                int code = n < 0 ? errno : ENOSPC;
                throw Failure(PS_IO, std::string("write the document: ") + std::strerror(code), code);
            }
            data += n;
            length -= static_cast<size_t>(n);
        }
    }
    void finish() override {}

  private:
    int fd_;
};

// The document's file, read with pread through a few cached blocks. qpdf's tokenizer reads
// 128 bytes at a time and seeks between objects; through stdio each seek drops the buffer and
// costs an lseek and a read of its own, which made reading a 2000-page document's cross-reference
// table and page objects take about three times as long as parsing them.
class DescriptorInputSource : public InputSource {
  public:
    DescriptorInputSource(int fd, std::string name) : fd_(fd), name_(std::move(name)) {
        struct stat info;
        if (fstat(fd_, &info) != 0) fail("measure the document");
        size_ = info.st_size;
    }
    ~DescriptorInputSource() override { ::close(fd_); }

    qpdf_offset_t findAndSkipNextEOL() override {
        // As qpdf's FileInputSource: the offset of the next \r or \n, and the position after
        // the run of \r and \n that starts there (the end of the file when there is none).
        while (position_ < size_) {
            Block const &block = blockAt(position_);
            size_t from = static_cast<size_t>(position_ - block.offset);
            // (Fewer bytes than fstat promised: the file was cut short while open.)
            if (from >= block.data.size()) break;
            char const *data = block.data.data();
            for (size_t i = from; i < block.data.size(); ++i) {
                if (data[i] == '\r' || data[i] == '\n') {
                    qpdf_offset_t found = block.offset + static_cast<qpdf_offset_t>(i);
                    position_ = found + 1;
                    char ch;
                    while (read(&ch, 1) == 1) {
                        if (ch != '\r' && ch != '\n') {
                            unreadCh(ch);
                            break;
                        }
                    }
                    return found;
                }
            }
            position_ = block.offset + static_cast<qpdf_offset_t>(block.data.size());
        }
        position_ = size_;
        return size_;
    }
    std::string const &getName() const override { return name_; }
    qpdf_offset_t tell() override { return position_; }
    void seek(qpdf_offset_t offset, int whence) override {
        qpdf_offset_t to = whence == SEEK_SET ? offset : whence == SEEK_END ? size_ + offset : position_ + offset;
        if (to < 0) throw std::runtime_error(name_ + ": seek before the start of the file");
        position_ = to;
    }
    void rewind() override { position_ = 0; }
    size_t read(char *buffer, size_t length) override {
        last_offset = position_;
        if (length == 0) return 0;
        if (position_ >= size_) {
            // As qpdf's FileInputSource: a read at the end leaves the position at the end.
            last_offset = position_ = size_;
            return 0;
        }
        length = static_cast<size_t>(std::min<qpdf_offset_t>(static_cast<qpdf_offset_t>(length), size_ - position_));
        size_t done = 0;
        // Large reads (stream data) go straight to the caller's buffer.
        if (length >= kBlockSize) {
            while (done < length) {
                ssize_t n = ::pread(fd_, buffer + done, length - done, position_ + static_cast<qpdf_offset_t>(done));
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) fail("read the document");
                if (n == 0) break;
                done += static_cast<size_t>(n);
            }
        } else {
            while (done < length) {
                Block const &block = blockAt(position_ + static_cast<qpdf_offset_t>(done));
                size_t from = static_cast<size_t>(position_ + static_cast<qpdf_offset_t>(done) - block.offset);
                if (from >= block.data.size()) break;
                size_t n = std::min(length - done, block.data.size() - from);
                std::memcpy(buffer + done, block.data.data() + from, n);
                done += n;
            }
        }
        position_ += static_cast<qpdf_offset_t>(done);
        return done;
    }
    void unreadCh(char) override {
        if (position_ > 0) --position_;
    }

    // The errno of the read that failed, kept because qpdf turns some failed reads into
    // warnings or missing objects (0 when none failed).
    int failure() const { return failure_; }

    // Up to `length` bytes from `offset`, read past the cache and without moving the position.
    size_t peek(qpdf_offset_t offset, char *buffer, size_t length) {
        size_t got = 0;
        // (A damaged cross-reference stream can give any offset: one outside the file has no bytes.)
        if (offset < 0) return 0;
        while (got < length && offset + static_cast<qpdf_offset_t>(got) < size_) {
            ssize_t n = ::pread(fd_, buffer + got, length - got, offset + static_cast<qpdf_offset_t>(got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail("read the document");
            if (n == 0) break;
            got += static_cast<size_t>(n);
        }
        return got;
    }

  private:
    static constexpr size_t kBlockSize = 16384;
    static constexpr size_t kBlocks = 8;
    struct Block {
        qpdf_offset_t offset = -1;
        std::string data;
        unsigned long long used = 0;
    };

    [[noreturn]] void fail(char const *what) {
        failure_ = errno;
        throw Failure(PS_IO, std::string(what) + " (" + name_ + "): " + std::strerror(failure_), failure_);
    }

    // The cached block holding `offset`, read if no block holds it (the least recently used
    // one is replaced).
    Block const &blockAt(qpdf_offset_t offset) {
        qpdf_offset_t start = offset - offset % static_cast<qpdf_offset_t>(kBlockSize);
        Block *victim = &blocks_[0];
        for (auto &block : blocks_) {
            if (block.offset == start) {
                block.used = ++clock_;
                return block;
            }
            if (block.used < victim->used) victim = &block;
        }
        victim->offset = -1;
        victim->data.resize(kBlockSize);
        size_t got = 0;
        while (got < kBlockSize) {
            ssize_t n = ::pread(fd_, victim->data.data() + got, kBlockSize - got, start + static_cast<qpdf_offset_t>(got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail("read the document");
            if (n == 0) break;
            got += static_cast<size_t>(n);
        }
        victim->data.resize(got);
        victim->offset = start;
        victim->used = ++clock_;
        return *victim;
    }

    int fd_;
    std::string name_;
    qpdf_offset_t size_ = 0, position_ = 0;
    Block blocks_[kBlocks];
    unsigned long long clock_ = 0;
    int failure_ = 0;
};

// A window on a file: the PDF that starts `start` bytes in. QPDF sees offsets from the PDF's
// first byte, which is what the incremental update's offsets must be relative to as well.
//
// It also bounds the time qpdf may spend: a damaged file can send qpdf's repair into work that
// grows faster than the file, and every step of it reads through here. Past the deadline each
// read fails, which ends the parse or the write at once.
class RegionInputSource : public InputSource {
  public:
    using Clock = std::chrono::steady_clock;

    RegionInputSource(std::shared_ptr<InputSource> file, qpdf_offset_t start, qpdf_offset_t size, int64_t budgetMilliseconds)
        : file_(std::move(file)), start_(start), size_(size), budget_(budgetMilliseconds),
          deadline_(budgetMilliseconds > 0 ? Clock::now() + std::chrono::milliseconds(budgetMilliseconds) : Clock::time_point::max()) {}

    // True once a read came after the deadline: whatever qpdf made of the failure, the work is void.
    bool expired() const { return expired_; }

    // A new budget from now on (for the write that follows a parse made within a shorter one).
    void setBudget(int64_t budgetMilliseconds) {
        budget_ = budgetMilliseconds;
        deadline_ = budgetMilliseconds > 0 ? Clock::now() + std::chrono::milliseconds(budgetMilliseconds) : Clock::time_point::max();
    }

    void checkDeadline() {
        if (expired_ || Clock::now() > deadline_) {
            expired_ = true;
            throw Failure(PS_TIMEOUT, "reading the PDF took longer than " + std::to_string(budget_) + " ms; it is damaged, or too complex");
        }
    }

    qpdf_offset_t findAndSkipNextEOL() override {
        checkDeadline();
        file_->seek(start_ + position_, SEEK_SET);
        qpdf_offset_t found = file_->findAndSkipNextEOL() - start_;
        cursor_ = file_->tell();
        position_ = std::min(cursor_ - start_, size_);
        return std::min(found, size_);
    }
    std::string const &getName() const override { return file_->getName(); }
    qpdf_offset_t tell() override { return position_; }
    void seek(qpdf_offset_t offset, int whence) override {
        switch (whence) {
        case SEEK_SET: position_ = offset; break;
        case SEEK_END: position_ = size_ + offset; break;
        default: position_ += offset; break;
        }
        if (position_ < 0) throw std::runtime_error(getName() + ": seek before the start of the PDF");
    }
    void rewind() override { position_ = 0; }
    size_t read(char *buffer, size_t length) override {
        checkDeadline();
        last_offset = position_;
        if (position_ >= size_) return 0;
        length = static_cast<size_t>(std::min<qpdf_offset_t>(static_cast<qpdf_offset_t>(length), size_ - position_));
        // qpdf reads objects in many small pieces; seeking the file only when it is not already
        // there keeps its buffer, instead of a system call per piece.
        if (cursor_ != start_ + position_) file_->seek(start_ + position_, SEEK_SET);
        size_t got = file_->read(buffer, length);
        position_ += static_cast<qpdf_offset_t>(got);
        cursor_ = start_ + position_;
        return got;
    }
    void unreadCh(char) override {
        if (position_ > 0) --position_;
    }

  private:
    std::shared_ptr<InputSource> file_;
    qpdf_offset_t start_, size_, position_ = 0;
    // Where `file_` is, as far as this source moved it; -1 when unknown.
    qpdf_offset_t cursor_ = -1;
    int64_t budget_;
    Clock::time_point deadline_;
    bool expired_ = false;
};

struct Box {
    double llx, lly, urx, ury;
};

Box normalized(QPDFObjectHandle rect, char const *what) {
    if (!rect.isRectangle()) throw Failure(PS_DAMAGED, std::string("the page has no valid ") + what);
    auto r = rect.getArrayAsRectangle();
    return {std::min(r.llx, r.urx), std::min(r.lly, r.ury), std::max(r.llx, r.urx), std::max(r.lly, r.ury)};
}

}  // namespace

// One annotation to add: its dictionary's own entries (PDF syntax), the ink its appearance
// draws (as an edit's form: stroke operators, then page `overlayPage` of a PDF of texts, which
// the save's annotations share), the box that appearance covers in ink space, and the drawing
// it was made from.
struct PendingAnnotation {
    std::string dictionary, strokes, overlay, source;
    int overlayPage = 0;
    double box[4];
};

struct ps_document {
    std::shared_ptr<QPDF> pdf = std::make_shared<QPDF>();
    // The overlays' own documents: copied streams are read from them when the result is written,
    // and they read from the overlays' bytes, kept here with them (qpdf does not copy a memory file).
    // (Declared first, so destroyed last.)
    std::vector<std::shared_ptr<std::string const>> overlays;
    std::vector<std::shared_ptr<QPDF>> inks;
    // Each overlay read once, by its bytes: the texts of one save's annotations come as pages of
    // one PDF, so that the font subset they share is copied into the document once.
    std::map<std::string, QPDF *> inkByOverlay;
    // The whole file (a .yianazip container's metadata included), read through the
    // descriptor the caller opened: the path is never opened again.
    std::shared_ptr<DescriptorInputSource> file;
    // The same source, seen as the PDF's region: it holds the time budget.
    std::shared_ptr<RegionInputSource> region;
    // Points of ink the next flatten adds, counted into the page's total under /Points.
    long long addedPoints = 0;
    // Positions in the page's /Forms of the edits the next flatten replaces (a reopened
    // drawing's), and the points they held, taken off the page's count.
    std::set<int> droppedForms;
    long long droppedPoints = 0;
    // Ink the next flatten adds as annotations, and the positions in the page's /Annots of
    // annotations of ours it replaces.
    std::vector<PendingAnnotation> annotations;
    std::set<int> droppedAnnotations;
    // Where the PDF starts in the file, and its length.
    qpdf_offset_t start = 0;
    qpdf_offset_t size = 0;
    std::vector<QPDFPageObjectHelper> pages;
    // Read only after repair, or encrypted: its bytes cannot take an appended update.
    bool needs_rewrite = false;
    bool spent = false;
};

namespace {

void report(ps_error *error, std::string const &text, int code = 0) {
    if (!error) return;
    std::snprintf(error->message, sizeof error->message, "%s", text.c_str());
    error->code = code;
}

// Runs `body`, turning every exception into a status and the caller's error record.
template <typename Body>
ps_status guarded(ps_error *error, ps_status fallback, Body body) {
    report(error, "");
    try {
        body();
        return PS_OK;
    } catch (Failure const &failure) {
        report(error, failure.what(), failure.code);
        return failure.status;
    } catch (QPDFExc const &exception) {
        report(error, exception.what());
        return fallback;
    } catch (std::bad_alloc const &) {
        report(error, "out of memory");
        return PS_INTERNAL;
    } catch (std::exception const &exception) {
        report(error, exception.what());
        return fallback;
    } catch (...) {
        report(error, "unknown C++ exception");
        return PS_INTERNAL;
    }
}

// `guarded`, for work on `document`: once a read came after the deadline, the outcome is a
// timeout, and once a read failed, an I/O error, whatever qpdf made of the failed read (it turns
// an unreadable object into null, and a page without its MediaBox would then look damaged).
template <typename Body>
ps_status guardedOn(ps_document *document, ps_error *error, ps_status fallback, Body body) {
    ps_status status = guarded(error, fallback, body);
    if (status != PS_TIMEOUT && document->region && document->region->expired()) {
        status = guarded(error, fallback, [&] { document->region->checkDeadline(); });
    } else if (status != PS_OK && status != PS_IO && document->file && document->file->failure() != 0) {
        int code = document->file->failure();
        status = guarded(error, fallback, [&] {
            throw Failure(PS_IO, std::string("read the document: ") + std::strerror(code), code);
        });
    }
    return status;
}

// Refuses a page tree deeper than kMaxPageTreeDepth, walking it without recursion before qpdf
// walks it with recursion. Each node is visited once, so a loop ends too (qpdf reports those).
void checkPageTreeDepth(QPDF &pdf) {
    std::vector<std::pair<QPDFObjectHandle, int>> pending;
    QPDFObjectHandle root = pdf.getRoot();
    if (root.isDictionary()) pending.push_back({root.getKey("/Pages"), 1});
    std::set<QPDFObjGen> seen;
    while (!pending.empty()) {
        auto [node, depth] = pending.back();
        pending.pop_back();
        if (!node.isDictionary()) continue;
        QPDFObjectHandle kids = node.getKey("/Kids");
        if (!kids.isArray()) continue;
        if (node.isIndirect() && !seen.insert(node.getObjGen()).second) continue;
        if (depth >= kMaxPageTreeDepth) {
            throw Failure(PS_DAMAGED, "the page tree is more than " + std::to_string(kMaxPageTreeDepth) +
                                          " levels deep; a document's is a few levels deep");
        }
        int count = kids.getArrayNItems();
        for (int i = 0; i < count; ++i) pending.push_back({kids.getArrayItem(i), depth + 1});
    }
}

QPDFPageObjectHelper &pageAt(ps_document *document, int page) {
    if (page < 0 || page >= static_cast<int>(document->pages.size())) {
        throw Failure(PS_PAGE_RANGE, "page " + std::to_string(page) + " is out of range: the document has " +
                                         std::to_string(document->pages.size()) + " pages (numbered from 0)");
    }
    return document->pages[static_cast<size_t>(page)];
}

ps_page_info inspect(QPDFPageObjectHelper &page) {
    Box media = normalized(page.getAttribute("/MediaBox", false), "MediaBox");
    Box visible = media;
    QPDFObjectHandle crop = page.getAttribute("/CropBox", false);
    if (crop.isRectangle()) {
        Box c = normalized(crop, "CropBox");
        // The visible region is the CropBox clipped to the MediaBox.
        visible = {std::max(c.llx, media.llx), std::max(c.lly, media.lly), std::min(c.urx, media.urx), std::min(c.ury, media.ury)};
        if (visible.urx <= visible.llx || visible.ury <= visible.lly) visible = media;
    }
    if (visible.urx <= visible.llx || visible.ury <= visible.lly) throw Failure(PS_DAMAGED, "the page's MediaBox is empty");
    int rotation = 0;
    QPDFObjectHandle rotate = page.getAttribute("/Rotate", false);
    if (rotate.isNumber()) {
        // Only multiples of 90 are meaningful; viewers round others, and so do we.
        long quarter = std::lround(rotate.getNumericValue() / 90.0);
        rotation = static_cast<int>(((quarter % 4) + 4) % 4) * 90;
    }
    double unit = 1.0;
    QPDFObjectHandle userUnit = page.getObjectHandle().getKey("/UserUnit");
    if (userUnit.isNumber() && userUnit.getNumericValue() > 0) unit = userUnit.getNumericValue();
    double width = visible.urx - visible.llx, height = visible.ury - visible.lly;
    ps_page_info info{visible.llx, visible.lly, visible.urx, visible.ury, rotation, unit, 0, 0};
    bool sideways = rotation == 90 || rotation == 270;
    info.display_width = (sideways ? height : width) * unit;
    info.display_height = (sideways ? width : height) * unit;
    return info;
}

// The matrix from ink space (display points, y up, origin at the displayed page's bottom-left
// corner) to the page's default user space, as a `cm` operator.
void placementMatrix(ps_page_info const &p, double m[6]) {
    double s = 1.0 / p.user_unit;
    double w = p.urx - p.llx, h = p.ury - p.lly;
    switch (p.rotation) {
    case 90: m[0] = 0; m[1] = s; m[2] = -s; m[3] = 0; m[4] = p.llx + w; m[5] = p.lly; break;
    case 180: m[0] = -s; m[1] = 0; m[2] = 0; m[3] = -s; m[4] = p.llx + w; m[5] = p.lly + h; break;
    case 270: m[0] = 0; m[1] = -s; m[2] = s; m[3] = 0; m[4] = p.llx; m[5] = p.lly + h; break;
    default: m[0] = s; m[1] = 0; m[2] = 0; m[3] = s; m[4] = p.llx; m[5] = p.lly; break;
    }
    for (int i = 0; i < 6; ++i) {
        if (std::fabs(m[i]) < 1e-12) m[i] = 0;
    }
}

std::string placement(ps_page_info const &p) {
    double m[6];
    placementMatrix(p, m);
    std::ostringstream out;
    out.precision(10);
    for (double v : m) out << v << ' ';
    out << "cm";
    return out.str();
}

// `data`, zlib-compressed at level 5. The ink and its drawing are long runs of numbers, on which
// zlib's default level 6 spends about twice as long for 0.7% fewer bytes (84 KB of handwriting
// ink: 7.1 ms and 36,743 bytes at 6, 3.2 ms and 36,994 bytes at 5). qpdf's own Pl_Flate has a
// level only for the whole process, which a rewrite through QPDFWriter uses as well.
std::shared_ptr<Buffer> deflated(std::string const &data) {
    if (data.size() > std::numeric_limits<uInt>::max()) throw Failure(PS_INTERNAL, "compress the ink: " + std::to_string(data.size()) + " bytes is more than zlib takes at once");
    z_stream z{};
    if (deflateInit(&z, 5) != Z_OK) throw Failure(PS_INTERNAL, "start zlib: " + std::string(z.msg ? z.msg : "no message"));
    std::vector<unsigned char> out(deflateBound(&z, static_cast<uLong>(data.size())));
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    int status = deflate(&z, Z_FINISH);
    size_t written = out.size() - z.avail_out;
    deflateEnd(&z);
    if (status != Z_STREAM_END) throw Failure(PS_INTERNAL, "compress the ink: zlib status " + std::to_string(status));
    auto result = std::make_shared<Buffer>(written);
    std::memcpy(result->getBuffer(), out.data(), written);
    return result;
}

// A new stream in `pdf` holding `data`, Flate-compressed.
QPDFObjectHandle compressedStream(QPDF &pdf, std::string const &data) {
    QPDFObjectHandle stream = QPDFObjectHandle::newStream(&pdf);
    stream.replaceStreamData(deflated(data), QPDFObjectHandle::newName("/FlateDecode"), QPDFObjectHandle::newNull());
    return stream;
}

// A new stream in `pdf` holding `data`, Flate-compressed where that is smaller with the
// filter's name counted: an annotation's stored drawing that takes its positions from the
// /InkList is some 30 bytes, which deflate makes no smaller.
QPDFObjectHandle smallestStream(QPDF &pdf, std::string const &data) {
    auto compressed = deflated(data);
    QPDFObjectHandle stream = QPDFObjectHandle::newStream(&pdf);
    if (compressed->getSize() + std::strlen(" /Filter /FlateDecode") < data.size()) {
        stream.replaceStreamData(compressed, QPDFObjectHandle::newName("/FlateDecode"), QPDFObjectHandle::newNull());
    } else {
        stream.replaceStreamData(data, QPDFObjectHandle::newNull(), QPDFObjectHandle::newNull());
    }
    return stream;
}

// A copy of `h` (from another document) for `pdf`: containers copied as direct objects,
// indirect objects through copyForeignObject (which keeps them indirect, once each).
QPDFObjectHandle imported(QPDF &pdf, QPDFObjectHandle h) {
    if (h.isIndirect()) return pdf.copyForeignObject(h);
    if (h.isDictionary()) {
        QPDFObjectHandle copy = QPDFObjectHandle::newDictionary();
        for (auto &entry : h.getDictAsMap()) copy.replaceKey(entry.first, imported(pdf, entry.second));
        return copy;
    }
    if (h.isArray()) {
        QPDFObjectHandle copy = QPDFObjectHandle::newArray();
        for (auto &item : h.getArrayAsVector()) copy.appendItem(imported(pdf, item));
        return copy;
    }
    return h;
}

// The byte offset of the last cross-reference section, read from the end of the PDF.
qpdf_offset_t lastStartXref(ps_document *document, bool &isStream) {
    InputSource &file = *document->file;
    qpdf_offset_t start = 0;
    // The PDF is the tail of the file; look at its last kilobytes.
    file.seek(0, SEEK_END);
    qpdf_offset_t end = file.tell();
    start = end - document->size;
    qpdf_offset_t from = std::max(start, end - 4096);
    std::string tail(static_cast<size_t>(end - from), '\0');
    file.seek(from, SEEK_SET);
    tail.resize(file.read(tail.data(), tail.size()));
    size_t at = tail.rfind("startxref");
    if (at == std::string::npos) throw Failure(PS_DAMAGED, "no startxref at the end of the PDF");
    qpdf_offset_t offset = std::strtoll(tail.c_str() + at + 9, nullptr, 10);
    char head[5] = {0};
    file.seek(start + offset, SEEK_SET);
    file.read(head, 4);
    isStream = std::strncmp(head, "xref", 4) != 0;
    return offset;
}

void bigEndian(std::string &out, unsigned long long value, int width) {
    for (int i = width - 1; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

// The end of a pipeline that appends to a string while a budget lasts. Past it, it stops the
// decoding at once (qpdf turns the throw into a failed pipeStreamData) and says so: a filter
// chain undone into memory is never allowed to grow past the budget.
class BoundedAppend : public Pipeline {
  public:
    BoundedAppend(std::string &out, size_t &budget) : Pipeline("bounded append", nullptr), out(out), budget(budget) {}
    void write(unsigned char const *data, size_t length) override {
        if (length > budget) {
            overBudget = true;
            throw std::length_error("past the budget");
        }
        budget -= length;
        out.append(reinterpret_cast<char const *>(data), length);
    }
    void finish() override {}
    bool overBudget = false;

  private:
    std::string &out;
    size_t &budget;
};

// A record's block (as appendBlock) of `stream`'s data, filters undone, straight into `out`,
// counted against `budget` (what all the blocks of one call may still take).
void appendDecodedBlock(std::string &out, QPDFObjectHandle stream, size_t &budget, char const *what) {
    size_t start = out.size();
    bigEndian(out, 0, 4);
    BoundedAppend sink(out, budget);
    bool filtered = false;
    bool worked = stream.pipeStreamData(&sink, &filtered, 0, qpdf_dl_generalized, true);
    if (sink.overBudget) throw Failure(PS_TOO_LARGE, std::string(what) + ": more than the page's ink may take");
    if (!worked) throw Failure(PS_DAMAGED, std::string(what) + ": its data cannot be decoded");
    size_t length = out.size() - start - 4;
    if (length > 0xFFFFFFFFu) throw Failure(PS_DAMAGED, "a stored block over 4 GB");
    for (int i = 0; i < 4; ++i) out[start + i] = static_cast<char>((length >> (8 * (3 - i))) & 0xFF);
}

// Counts the numbers in `object` (arrays and dictionaries walked, indirect objects not
// followed, as qpdf's JSON does not) into `numbers`; false as soon as they pass `limit`,
// before anything is copied.
bool numbersWithin(QPDFObjectHandle object, size_t &numbers, size_t limit) {
    if (object.isNumber()) return ++numbers <= limit;
    if (object.isIndirect()) return true;
    if (object.isArray()) {
        int count = object.getArrayNItems();
        for (int index = 0; index < count; ++index) {
            if (!numbersWithin(object.getArrayItem(index), numbers, limit)) return false;
        }
    } else if (object.isDictionary()) {
        for (auto const &key : object.getKeys()) {
            if (!numbersWithin(object.getKey(key), numbers, limit)) return false;
        }
    }
    return true;
}

// `data` as a record's block: its length in 4 bytes, big-endian, then the bytes.
void appendBlock(std::string &out, std::string const &data) {
    if (data.size() > 0xFFFFFFFFu) throw Failure(PS_DAMAGED, "a stored block over 4 GB");
    bigEndian(out, data.size(), 4);
    out += data;
}

// `out` copied into memory the caller frees with ps_free (nothing, for no bytes).
void handOver(std::string const &out, unsigned char **bytes, size_t *length) {
    if (out.empty()) return;
    *bytes = static_cast<unsigned char *>(std::malloc(out.size()));
    if (!*bytes) throw std::bad_alloc();
    std::memcpy(*bytes, out.data(), out.size());
    *length = out.size();
}

// Whether the bytes of object `og`, where the cross-reference table puts it, show a dictionary
// without a /Kids key: a page, as far as numbering pages goes. Only plain text answers yes: the
// object's own header at its offset, then `<<`, then up to `endobj` no /Kids, and nothing that
// could hide one from a search (a literal string, a comment, a name written with #, a stream).
// Anything else is left to qpdf (false).
bool plainLeaf(ps_document *document, std::map<QPDFObjGen, QPDFXRefEntry> const &table, QPDFObjGen og) {
    auto entry = table.find(og);
    if (entry == table.end() || entry->second.getType() != 1) return false;
    char buffer[2048];
    qpdf_offset_t start = document->start + entry->second.getOffset();
    size_t length = document->file->peek(start, buffer, sizeof buffer);
    std::string_view text(buffer, length);
    std::string header = std::to_string(og.getObj()) + " " + std::to_string(og.getGen()) + " obj";
    if (text.substr(0, header.size()) != header) return false;
    size_t at = header.size();
    while (at < text.size() && (text[at] == ' ' || text[at] == '\r' || text[at] == '\n' || text[at] == '\t')) ++at;
    if (text.substr(at, 2) != "<<") return false;
    // The keyword, not a name that contains it (/endobj): after white space or a dictionary's end.
    size_t end = text.find("endobj", at);
    if (end == std::string_view::npos || std::strchr(" \r\n\t\f>", text[end - 1]) == nullptr || text[end - 1] == '\0') return false;
    std::string_view body = text.substr(at, end - at);
    for (char const *hidden : {"/Kids", "(", "%", "#", "stream"}) {
        if (body.find(hidden) != std::string_view::npos) return false;
    }
    return true;
}

// The pages in order, as qpdf's own walk (getAllPages) would list them, without parsing every
// page object: qpdf resolves each kid of the tree to see whether it has /Kids, 8 µs an object,
// which for a long document was a third of a flatten (16 ms for 2000 pages), and a 500 MB scan's
// one stroke cost 16 times a one-page scan's. Here a kid whose bytes show a plain dictionary
// without /Kids (`plainLeaf`) is counted as the page qpdf would count it as, unparsed; qpdf
// resolves the rest. False, with `pages` unspecified, wherever qpdf's walk would warn, repair
// or refuse (a node not of /Type /Pages, a direct, repeated or non-dictionary kid, a loop, a
// root with /Parent): qpdf's walk then decides, as before. Refuses a tree deeper than
// kMaxPageTreeDepth as checkPageTreeDepth does.
bool listPagesQuickly(ps_document *document, std::map<QPDFObjGen, QPDFXRefEntry> const &table, std::vector<QPDFObjGen> &pages) {
    QPDF &pdf = *document->pdf;
    if (pdf.anyWarnings() || pdf.isEncrypted()) return false;
    QPDFObjectHandle root = pdf.getTrailer().getKey("/Root");
    if (!root.isDictionary() || !root.getKey("/Type").isNameAndEquals("/Catalog")) return false;
    QPDFObjectHandle top = root.getKey("/Pages");
    if (!top.isIndirect() || !top.isDictionary() || top.hasKey("/Parent") || !top.hasKey("/Kids")) return false;
    std::set<QPDFObjGen> nodes, leaves;
    struct Frame {
        QPDFObjectHandle kids;
        int next, count, depth;
    };
    std::vector<Frame> stack;
    auto enter = [&](QPDFObjectHandle node, int depth) {
        if (!nodes.insert(node.getObjGen()).second || !node.isDictionaryOfType("/Pages")) return false;
        QPDFObjectHandle kids = node.getKey("/Kids");
        if (!kids.isArray()) return false;
        if (depth >= kMaxPageTreeDepth) {
            throw Failure(PS_DAMAGED, "the page tree is more than " + std::to_string(kMaxPageTreeDepth) +
                                          " levels deep; a document's is a few levels deep");
        }
        stack.push_back({kids, 0, kids.getArrayNItems(), depth});
        return true;
    };
    if (!enter(top, 1)) return false;
    while (!stack.empty()) {
        Frame &frame = stack.back();
        if (frame.next == frame.count) {
            stack.pop_back();
            continue;
        }
        QPDFObjectHandle kid = frame.kids.getArrayItem(frame.next++);
        if (!kid.isIndirect()) return false;
        QPDFObjGen og = kid.getObjGen();
        if (frame.next % 64 == 0) document->region->checkDeadline();
        if (!plainLeaf(document, table, og)) {
            if (!kid.isDictionary()) return false;
            if (kid.hasKey("/Kids")) {
                if (!enter(kid, frame.depth + 1)) return false;
                continue;
            }
            if (!kid.isDictionaryOfType("/Page")) return false;
        }
        if (!leaves.insert(og).second) return false;
        pages.push_back(og);
    }
    return !pdf.anyWarnings();
}

// What one object stream may hold. qpdf parses every object of an object stream the first
// time any of them is needed, and keeps them: about 265 bytes of memory a value (measured with
// qpdf 11.3 on an array of integers), so 22 KB of deflated zeros spelling 2 million numbers
// made 530 MB before anything of ours could count them. Real streams hold a few hundred objects
// of a few dozen values each; 200,000 values keep the parse near 50 MB, and 32 MiB of text
// keeps qpdf's copy of the decoded stream itself bounded.
const size_t kMaxObjectStreamValues = 200'000;
const size_t kMaxObjectStreamBytes = size_t(32) << 20;

// The end of a pipeline that counts the values an object stream's text spells (numbers, names,
// keywords, strings, arrays, dictionaries; a reference counts three, a string's contents none)
// and stops the decoding as soon as either bound is passed, before qpdf would parse it. With
// `untilStream`, the text is one plain object's, read from the file: counting ends at its
// `stream` or `endobj` keyword (a stream's data is no values).
class ValueCount : public Pipeline {
  public:
    ValueCount(RegionInputSource &region, bool untilStream = false)
        : Pipeline("value count", nullptr), untilStream_(untilStream), region_(region) {}
    void write(unsigned char const *data, size_t length) override {
        bytes += length;
        if (bytes > kMaxObjectStreamBytes) stop();
        for (size_t i = 0; i < length && !ended; ++i) step(static_cast<char>(data[i]));
        if (values > kMaxObjectStreamValues) stop();
        region_.checkDeadline();
    }
    void finish() override {}
    size_t values = 0, bytes = 0;
    bool over = false, ended = false;

  private:
    enum class State { between, token, string, escape, hex, comment };
    State state_ = State::between;
    int depth_ = 0;  // nested parentheses within a string
    bool untilStream_;
    std::string word_;  // the keyword being read, its first letters
    RegionInputSource &region_;

    static bool space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\0'; }
    static bool delimiter(char c) { return std::strchr("()<>[]{}/%", c) != nullptr; }
    void stop() {
        over = true;
        throw std::length_error("past the object stream bound");
    }
    void step(char c) {
        switch (state_) {
        case State::string:
            if (c == '\\') state_ = State::escape;
            else if (c == '(') ++depth_;
            else if (c == ')' && --depth_ == 0) state_ = State::between;
            return;
        case State::escape:
            state_ = State::string;
            return;
        case State::hex:
            if (c == '>') state_ = State::between;
            return;
        case State::comment:
            if (c == '\n' || c == '\r') state_ = State::between;
            return;
        case State::token:
            if (!space(c) && !delimiter(c)) {
                if (word_.size() < 8) word_.push_back(c);
                return;
            }
            state_ = State::between;
            if (untilStream_ && (word_ == "stream" || word_ == "endobj")) {
                ended = true;
                return;
            }
            break;
        case State::between:
            break;
        }
        if (space(c) || c == ']' || c == ')' || c == '>' || c == '}') return;
        ++values;
        if (c == '(') {
            state_ = State::string;
            depth_ = 1;
        } else if (c == '%') {
            --values;
            state_ = State::comment;
        } else if (c == '/' || !delimiter(c)) {
            // (a name runs on from its slash as any other token)
            state_ = State::token;
            word_.assign(1, c);
        }
        // '<' and '[' open a dictionary, hex string or array: one value each; a hex string's
        // digits are read as a token's, which only over-counts.
    }
};

// Objects written plain that take more room than this in the file are counted before qpdf
// parses them: a dictionary or array has no business being larger, and a stream's dictionary
// ends a few hundred bytes in.
const qpdf_offset_t kPlainObjectScan = 256 << 10;

// Refuses a document one of whose object streams spells more than kMaxObjectStreamValues
// values or kMaxObjectStreamBytes of text, before qpdf parses any of them, and one with a plain
// object that does (4 MB of "0 " is 2 million numbers, 530 MB once parsed). Each object stream
// is decoded once more for this, and the start of each plain object larger than
// kPlainObjectScan read; a document with neither costs one walk of its cross-reference table.
void checkObjectStreams(ps_document *document, std::map<QPDFObjGen, QPDFXRefEntry> const &table) {
    QPDF &pdf = *document->pdf;
    std::set<int> streams;
    std::map<qpdf_offset_t, int> plain;  // offset -> object number
    for (auto const &entry : table) {
        if (entry.second.getType() == 2) streams.insert(entry.second.getObjStreamNumber());
        if (entry.second.getType() == 1) plain[entry.second.getOffset()] = entry.first.getObj();
    }
    RegionInputSource &region = *document->region;
    for (auto at = plain.begin(); at != plain.end(); ++at) {
        auto next = std::next(at);
        qpdf_offset_t end = next == plain.end() ? document->size : next->first;
        if (at->first < 0 || end - at->first <= kPlainObjectScan) continue;
        // Only where the table points at an object's header: a table that points elsewhere is
        // qpdf's to repair, not ours to count.
        std::string head(32, '\0');
        region.seek(at->first, SEEK_SET);
        head.resize(region.read(head.data(), head.size()));
        std::string expected = std::to_string(at->second) + " ";
        if (head.compare(0, expected.size(), expected) != 0 || head.find("obj") == std::string::npos) continue;
        ValueCount count(region, true);
        std::vector<unsigned char> buffer(64 << 10);
        qpdf_offset_t offset = at->first + static_cast<qpdf_offset_t>(head.find("obj") + 3);
        try {
            while (offset < end && !count.ended) {
                region.seek(offset, SEEK_SET);
                size_t want = static_cast<size_t>(std::min<qpdf_offset_t>(static_cast<qpdf_offset_t>(buffer.size()), end - offset));
                size_t got = region.read(reinterpret_cast<char *>(buffer.data()), want);
                if (got == 0) break;
                count.write(buffer.data(), got);
                offset += static_cast<qpdf_offset_t>(got);
            }
        } catch (std::length_error const &) {
        }
        if (count.over) {
            throw Failure(PS_TOO_LARGE, "object " + std::to_string(at->second) + " holds more than " +
                                            std::to_string(kMaxObjectStreamValues) + " values, more than a document's would and more than is read");
        }
    }
    for (int number : streams) {
        QPDFObjectHandle stream = pdf.getObjectByID(number, 0);
        if (!stream.isStream()) continue;  // qpdf's own error when an object in it is read
        ValueCount count(*document->region);
        try {
            stream.pipeStreamData(&count, 0, qpdf_dl_generalized, true);
        } catch (...) {
            if (!count.over) throw;
        }
        // (qpdf may have turned a passed deadline into a failed decode)
        document->region->checkDeadline();
        if (count.over) {
            throw Failure(PS_TOO_LARGE, "object stream " + std::to_string(number) + " holds more than " +
                                            (count.bytes > kMaxObjectStreamBytes
                                                 ? std::to_string(kMaxObjectStreamBytes >> 20) + " MiB of objects"
                                                 : std::to_string(kMaxObjectStreamValues) + " values") +
                                            ", more than a document's would and more than is read");
        }
    }
}

}  // namespace

extern "C" {

ps_status ps_open(int fd, const char *name, int64_t offset, int64_t budget_ms, ps_document **out, ps_error *error) {
    *out = nullptr;
    auto document = std::make_unique<ps_document>();
    ps_status status = guardedOn(document.get(), error, PS_DAMAGED, [&] {
        // qpdf reads through a duplicate of the caller's descriptor, which the source owns.
        int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (copy < 0) throw Failure(PS_IO, std::string("duplicate the descriptor: ") + std::strerror(errno), errno);
        std::shared_ptr<DescriptorInputSource> file;
        try {
            file = std::make_shared<DescriptorInputSource>(copy, name);
        } catch (...) {
            close(copy);
            throw;
        }
        document->file = file;
        file->seek(0, SEEK_END);
        qpdf_offset_t total = file->tell();
        if (offset < 0 || offset > total) throw Failure(PS_DAMAGED, "the PDF's offset is outside the file");
        document->start = offset;
        document->size = total - offset;
        auto region = std::make_shared<RegionInputSource>(file, offset, document->size, budget_ms);
        document->region = region;
        document->pdf->setSuppressWarnings(true);
        try {
            document->pdf->processInputSource(region);
            region->checkDeadline();
        } catch (QPDFExc const &error) {
            region->checkDeadline();
            if (error.getErrorCode() == qpdf_e_password) {
                throw Failure(PS_ENCRYPTED, "the PDF is encrypted and needs a password; it is not served");
            }
            throw Failure(PS_DAMAGED, std::string("the PDF cannot be read: ") + error.what());
        }
        // The cross-reference table, copied out of qpdf once for both walks of it.
        std::map<QPDFObjGen, QPDFXRefEntry> const table = document->pdf->getXRefTable();
        checkObjectStreams(document.get(), table);
        std::vector<QPDFObjGen> quick;
        if (listPagesQuickly(document.get(), table, quick)) {
            for (QPDFObjGen og : quick) document->pages.emplace_back(document->pdf->getObject(og));
        } else {
            checkPageTreeDepth(*document->pdf);
            document->pages = QPDFPageDocumentHelper(*document->pdf).getAllPages();
        }
        if (document->pages.empty()) throw Failure(PS_DAMAGED, "the PDF has no pages");
        // Offsets repaired by qpdf, or encryption, rule out appending an update: such a
        // document is written out whole (encrypted as it was) instead.
        document->needs_rewrite = document->pdf->anyWarnings() || document->pdf->isEncrypted();
    });
    if (status == PS_OK) *out = document.release();
    return status;
}

void ps_close(ps_document *document) { delete document; }

int ps_page_count(ps_document *document) { return static_cast<int>(document->pages.size()); }

ps_status ps_page_info_at(ps_document *document, int page, ps_page_info *out, ps_error *error) {
    return guardedOn(document, error, PS_DAMAGED, [&] { *out = inspect(pageAt(document, page)); });
}

ps_status ps_page_drawing(ps_document *document, int page, size_t max_bytes, unsigned char **bytes, size_t *length, ps_error *error) {
    *bytes = nullptr;
    *length = 0;
    return guardedOn(document, error, PS_DAMAGED, [&] {
        size_t budget = max_bytes;
        QPDFObjectHandle marker = pageAt(document, page).getObjectHandle().getKey(kMarker);
        if (!marker.isDictionary()) return;
        // An edit by an earlier version of this code stored all the page's ink as one drawing
        // on the marker; edits since then each store theirs on their own form. Every entry of
        // /Forms gets a record, so that a record's position is the form's.
        std::string out;
        auto record = [&](char kind, QPDFObjectHandle source) {
            out += kind;
            if (source.isStream()) {
                appendDecodedBlock(out, source, budget, "a drawing stored with the page's ink");
            } else {
                appendBlock(out, std::string());
            }
        };
        QPDFObjectHandle legacy = marker.getKey("/Drawing");
        if (legacy.isStream()) record('L', legacy);
        QPDFObjectHandle forms = marker.getKey("/Forms");
        if (forms.isArray()) {
            for (auto &form : forms.getArrayAsVector()) {
                record('F', form.isStream() ? form.getDict().getKey(kDrawingKey) : QPDFObjectHandle::newNull());
            }
        }
        handOver(out, bytes, length);
    });
}

void ps_drop_forms(ps_document *document, const int *forms, size_t count, int64_t points) {
    document->droppedForms.insert(forms, forms + count);
    document->droppedPoints = points;
}

void ps_drop_annotations(ps_document *document, const int *annotations, size_t count) {
    document->droppedAnnotations.insert(annotations, annotations + count);
}

ps_status ps_add_annotation(ps_document *document, const char *dictionary, size_t dictionary_length,
                            const unsigned char *strokes, size_t strokes_length, const unsigned char *overlay, size_t overlay_length,
                            int overlay_page, const unsigned char *source, size_t source_length, const double box[4], ps_error *error) {
    return guarded(error, PS_INTERNAL, [&] {
        PendingAnnotation pending;
        pending.dictionary.assign(dictionary, dictionary_length);
        pending.strokes.assign(reinterpret_cast<char const *>(strokes), strokes_length);
        pending.overlay.assign(reinterpret_cast<char const *>(overlay), overlay_length);
        pending.overlayPage = overlay_page;
        pending.source.assign(reinterpret_cast<char const *>(source), source_length);
        std::copy(box, box + 4, pending.box);
        document->annotations.push_back(std::move(pending));
    });
}

ps_status ps_page_placement(ps_document *document, int page, double matrix[6], ps_error *error) {
    return guardedOn(document, error, PS_DAMAGED, [&] { placementMatrix(inspect(pageAt(document, page)), matrix); });
}

ps_status ps_page_annotations(ps_document *document, int page, size_t max_bytes, size_t max_numbers, int other_ink,
                              unsigned char **bytes, size_t *length, ps_error *error) {
    *bytes = nullptr;
    *length = 0;
    return guardedOn(document, error, PS_DAMAGED, [&] {
        size_t budget = max_bytes, numbers = 0;
        QPDFObjectHandle annotations = pageAt(document, page).getObjectHandle().getKey("/Annots");
        if (!annotations.isArray()) return;
        std::string out;
        std::vector<QPDFObjectHandle> items = annotations.getArrayAsVector();
        // Each entry's value as JSON (qpdf's version 2: names with their slash, strings as "u:"
        // text or "b:" hex), every number counted against the bound before it is written out
        // (an indirect object is written as its reference, and not counted).
        auto copy = [&](QPDFObjectHandle from, QPDFObjectHandle to, std::initializer_list<char const *> keys) {
            for (char const *key : keys) {
                if (!from.hasKey(key)) continue;
                QPDFObjectHandle value = from.getKey(key);
                if (!numbersWithin(value, numbers, max_numbers)) {
                    throw Failure(PS_TOO_LARGE, "the ink annotations of the page list more numbers than the page's ink may hold");
                }
                to.replaceKey(key, value);
            }
        };
        auto entriesBlock = [&](QPDFObjectHandle seen) {
            std::string entries = seen.getJSON(2, true).unparse();
            if (entries.size() > budget) throw Failure(PS_TOO_LARGE, "the ink annotations of the page: more than the page's ink may take");
            budget -= entries.size();
            appendBlock(out, entries);
        };
        for (size_t index = 0; index < items.size(); ++index) {
            QPDFObjectHandle annotation = items[index];
            if (!annotation.isDictionary()) continue;
            QPDFObjectHandle source = annotation.getKey(kDrawingKey);
            if (source.isStream()) {
                // Ours: what another program may have changed, and the drawing stored with it.
                QPDFObjectHandle seen = QPDFObjectHandle::newDictionary();
                copy(annotation, seen, {"/Subtype", "/Rect", "/C", "/InkList", "/BS", "/IT", "/Contents", "/CA", kHashKey});
                out += 'A';
                bigEndian(out, index, 4);
                entriesBlock(seen);
                appendDecodedBlock(out, source, budget, "a drawing stored with an ink annotation");
            } else if (other_ink && annotation.getKey("/Subtype").isNameAndEquals("/Ink")) {
                // Another program's: what it says of its ink and who made it, where its popup
                // is in /Annots, and what its appearance draws (filters undone, within the
                // bound), with the matrix, box and blend that place it.
                QPDFObjectHandle seen = QPDFObjectHandle::newDictionary();
                copy(annotation, seen, {"/Subtype", "/Rect", "/C", "/InkList", "/BS", "/Border", "/IT", "/CA", "/F", "/T", "/Subj", "/M", "/NM",
                                        "/CreationDate", "/Contents", "/RC"});
                QPDFObjectHandle popup = annotation.getKey("/Popup");
                if (popup.isIndirect()) {
                    for (size_t other = 0; other < items.size(); ++other) {
                        if (items[other].isIndirect() && items[other].getObjGen() == popup.getObjGen() &&
                            items[other].isDictionary() && items[other].getKey("/Subtype").isNameAndEquals("/Popup")) {
                            seen.replaceKey("/CanvasBridgePopup", QPDFObjectHandle::newInteger(static_cast<long long>(other)));
                            break;
                        }
                    }
                }
                QPDFObjectHandle states = annotation.getKey("/AP"), appearance;
                if (states.isDictionary()) appearance = states.getKey("/N");
                if (appearance.isDictionary() && !appearance.isStream()) appearance = appearance.getKey(annotation.getKey("/AS").isName() ? annotation.getKey("/AS").getName() : "/None");
                bool drawn = appearance.isStream();
                if (drawn) {
                    QPDFObjectHandle dict = appearance.getDict();
                    copy(dict, seen, {"/BBox", "/Matrix"});
                    // A multiply blend in the appearance's graphics states: a highlighter.
                    QPDFObjectHandle graphicsStates =
                        dict.getKey("/Resources").isDictionary() ? dict.getKey("/Resources").getKey("/ExtGState") : QPDFObjectHandle();
                    if (graphicsStates.isDictionary()) {
                        for (auto const &key : graphicsStates.getKeys()) {
                            QPDFObjectHandle state = graphicsStates.getKey(key);
                            if (state.isDictionary() && state.getKey("/BM").isNameAndEquals("/Multiply")) {
                                seen.replaceKey("/CanvasBridgeMultiply", QPDFObjectHandle::newBool(true));
                            }
                        }
                    }
                }
                out += 'O';
                bigEndian(out, index, 4);
                entriesBlock(seen);
                if (drawn) {
                    appendDecodedBlock(out, appearance, budget, "the appearance of an ink annotation");
                } else {
                    appendBlock(out, std::string());
                }
            }
        }
        handOver(out, bytes, length);
    });
}

}  // extern "C"

namespace {

// A direct copy of a dictionary's entries (an empty one for anything else). A fresh container
// belongs to no document, so it may hold objects of the document and of the ink's scratch
// document side by side.
QPDFObjectHandle entriesOf(QPDFObjectHandle dictionary) {
    QPDFObjectHandle copy = QPDFObjectHandle::newDictionary();
    if (dictionary.isDictionary()) {
        for (auto &entry : dictionary.getDictAsMap()) copy.replaceKey(entry.first, entry.second);
    }
    return copy;
}

QPDFObjectHandle itemsOf(QPDFObjectHandle array) {
    QPDFObjectHandle copy = QPDFObjectHandle::newArray();
    if (array.isArray()) {
        for (auto &item : array.getArrayAsVector()) copy.appendItem(item);
    }
    return copy;
}

// The content of a form that draws ink: `strokes` (operators in display points, y down)
// flipped into ink space, then page `overlayPage` of the PDF `overlay`'s content (texts as
// Cairo set them), whose resources, and the multiply state the strokes may use, go into
// `resources`. An overlay is parsed once for all the annotations that draw its pages; what
// they use is copied into `made` once.
std::string inkContent(ps_document *document, QPDF &made, ps_page_info const &info, std::string const &strokes,
                       std::string const &overlay, QPDFObjectHandle resources, int overlayPage = 0) {
    std::string content;
    if (!strokes.empty()) {
        std::ostringstream flip;
        flip.precision(10);
        flip << "q 1 0 0 -1 0 " << info.display_height << " cm\n";
        content = flip.str() + strokes + "\nQ\n";
        if (strokes.find(kMultiplyState) != std::string::npos) {
            QPDFObjectHandle multiply = QPDFObjectHandle::newDictionary();
            multiply.replaceKey("/BM", QPDFObjectHandle::newName("/Multiply"));
            QPDFObjectHandle states = QPDFObjectHandle::newDictionary();
            states.replaceKey(kMultiplyState, multiply);
            resources.replaceKey("/ExtGState", states);
        }
    }
    if (!overlay.empty()) {
        QPDF *parsed = nullptr;
        auto known = document->inkByOverlay.find(overlay);
        if (known != document->inkByOverlay.end()) {
            parsed = known->second;
        } else {
            document->overlays.push_back(std::make_shared<std::string const>(overlay));
            std::string const &bytes = *document->overlays.back();
            document->inks.push_back(std::make_shared<QPDF>());
            parsed = document->inks.back().get();
            parsed->setSuppressWarnings(true);
            std::string overlayName = "canvas overlay";
            parsed->processMemoryFile(overlayName.c_str(), bytes.data(), bytes.size());
            document->inkByOverlay[overlay] = parsed;
        }
        std::vector<QPDFPageObjectHelper> inkPages = QPDFPageDocumentHelper(*parsed).getAllPages();
        if (overlayPage < 0 || static_cast<size_t>(overlayPage) >= inkPages.size()) {
            throw Failure(PS_BAD_OVERLAY, "the overlay has no page " + std::to_string(overlayPage + 1));
        }
        QPDFPageObjectHelper &inkPage = inkPages[static_cast<size_t>(overlayPage)];
        Pl_Buffer texts("overlay content");
        inkPage.pipeContents(&texts);
        std::shared_ptr<Buffer> data = texts.getBufferSharedPointer();
        content.append(reinterpret_cast<char const *>(data->getBuffer()), data->getSize());
        QPDFObjectHandle overlayResources = inkPage.getAttribute("/Resources", false);
        if (overlayResources.isDictionary()) {
            for (auto &entry : overlayResources.getDictAsMap()) {
                QPDFObjectHandle mine = resources.getKey(entry.first);
                QPDFObjectHandle theirs = imported(made, entry.second);
                if (mine.isDictionary() && theirs.isDictionary()) {
                    for (auto &item : theirs.getDictAsMap()) mine.replaceKey(item.first, item.second);
                } else {
                    resources.replaceKey(entry.first, theirs);
                }
            }
        }
    }
    return content;
}

// Whether `stream` is one of the streams that draw an edit's form ("q", the placement, the
// form's name and "Do", "Q"; the first edit's begins with the "Q" that closes the page's own
// content), and if so the form's name and whether it begins with that "Q". Our draw streams
// are short and unfiltered; anything else is the page's own content.
bool drawsForm(QPDFObjectHandle stream, std::string &name, bool &closesPage) {
    if (!stream.isStream() || !stream.getDict().getKey("/Filter").isNull()) return false;
    QPDFObjectHandle length = stream.getDict().getKey("/Length");
    if (!length.isInteger() || length.getIntValue() > 512) return false;
    std::shared_ptr<Buffer> raw = stream.getRawStreamData();
    std::string data(reinterpret_cast<char const *>(raw->getBuffer()), raw->getSize());
    closesPage = data.rfind("Q\n", 0) == 0;
    if (closesPage) data.erase(0, 2);
    std::string const tail = " Do\nQ\n";
    if (data.rfind("q\n", 0) != 0 || data.size() < tail.size() + 2 ||
        data.compare(data.size() - tail.size(), tail.size(), tail) != 0) {
        return false;
    }
    size_t end = data.size() - tail.size();
    size_t start = data.rfind('\n', end - 1) + 1;
    name = data.substr(start, end - start);
    return name.rfind(kFormPrefix, 0) == 0;
}

// Adds one edit's ink to page `page` of `document`: the new objects (the form, the drawing it
// was made from, the streams that draw it, what the texts use) are made in `made`, and the
// page's new dictionary is returned as a direct object, its values either the document's
// objects or `made`'s.
//
// `made` is the document itself when the whole document is rewritten. For an appended update
// it is a scratch document: qpdf numbers an object made in a document after every object that
// document could hold, and finds that number by reading every object of the file, which for a
// long document cost more than the rest of the flatten (12 ms of 2000 pages' objects).
QPDFObjectHandle applyInk(ps_document *document, QPDF &made, int page, const unsigned char *overlay, size_t overlay_length,
                          const unsigned char *strokes, size_t strokes_length, const unsigned char *drawing, size_t drawing_length) {
        if (document->spent) throw Failure(PS_INTERNAL, "this document handle was already used for a flatten");
        document->spent = true;
        QPDFPageObjectHelper &target = pageAt(document, page);
        ps_page_info info = inspect(target);
        QPDFObjectHandle pageObject = target.getObjectHandle();

        // The form: the strokes (flipped from display points, y down), then the texts as Cairo
        // drew them, with the resources they use. It has no transparency group, so that a
        // multiply blend multiplies with the page below instead of with nothing.
        QPDFObjectHandle resources = QPDFObjectHandle::newDictionary();
        std::string content = inkContent(document, made, info, std::string(reinterpret_cast<char const *>(strokes), strokes_length),
                                         std::string(reinterpret_cast<char const *>(overlay), overlay_length), resources);
        // An edit that only takes ink away (a reopened drawing erased to nothing) draws nothing.
        bool adds = !content.empty();
        QPDFObjectHandle form;
        if (adds) {
            form = compressedStream(made, content);
            QPDFObjectHandle formDict = form.getDict();
            formDict.replaceKey("/Type", QPDFObjectHandle::newName("/XObject"));
            formDict.replaceKey("/Subtype", QPDFObjectHandle::newName("/Form"));
            formDict.replaceKey("/BBox", QPDFObjectHandle::newArray(QPDFObjectHandle::Rectangle(0, 0, info.display_width, info.display_height)));
            formDict.replaceKey("/Resources", resources);
            QPDFObjectHandle source = compressedStream(made, std::string(reinterpret_cast<char const *>(drawing), drawing_length));
            source.getDict().replaceKey("/Type", QPDFObjectHandle::newName("/CanvasBridgeDrawing"));
            formDict.replaceKey(kDrawingKey, source);
        }

        // The page's new dictionary: its own entries, and its resources (its own, shared or
        // inherited: copied onto the page either way) with the form under a name of its own.
        // Only a dictionary is read for resources: a damaged file can have a stream there, and
        // a page's resources are a dictionary or nothing.
        QPDFObjectHandle dictionary = entriesOf(pageObject);
        QPDFObjectHandle pageResources = entriesOf(target.getAttribute("/Resources", false));
        QPDFObjectHandle xobjects = entriesOf(pageResources.getKey("/XObject"));
        QPDFObjectHandle marker = pageObject.getKey(kMarker);
        // The page's own content is bracketed by the first edit that draws a form (an edit
        // made only of annotations leaves the content as it is).
        bool bracketed = marker.isDictionary() &&
                         !(marker.getKey("/Open").isNull() && marker.getKey("/Forms").isNull() && marker.getKey("/Drawing").isNull());
        bool firstEdit = adds && !bracketed;
        marker = entriesOf(marker);
        QPDFObjectHandle forms = itemsOf(marker.getKey("/Forms"));

        // A reopened drawing replaces the edits it was reopened from: the page stops drawing
        // them (their forms leave /Forms, their names the resources, their draw streams the
        // content), while the file's earlier revisions keep them.
        std::set<std::string> droppedNames;
        if (!document->droppedForms.empty()) {
            std::vector<QPDFObjectHandle> items = forms.getArrayAsVector();
            std::set<QPDFObjGen> dropped;
            for (int index : document->droppedForms) {
                if (index < 0 || static_cast<size_t>(index) >= items.size() || !items[index].isIndirect()) {
                    throw Failure(PS_INTERNAL, "the page has no ink form at position " + std::to_string(index) + " to replace");
                }
                dropped.insert(items[index].getObjGen());
            }
            forms = QPDFObjectHandle::newArray();
            for (size_t index = 0; index < items.size(); ++index) {
                if (!document->droppedForms.count(static_cast<int>(index))) forms.appendItem(items[index]);
            }
            for (auto &entry : xobjects.getDictAsMap()) {
                if (entry.second.isIndirect() && dropped.count(entry.second.getObjGen())) droppedNames.insert(entry.first);
            }
            for (auto &name : droppedNames) xobjects.removeKey(name);
        }
        std::string name;
        if (adds) {
            int number = forms.getArrayNItems() + 1;
            while (xobjects.hasKey(kFormPrefix + std::to_string(number))) ++number;
            name = kFormPrefix + std::to_string(number);
            xobjects.replaceKey(name, form);
        }
        pageResources.replaceKey("/XObject", xobjects);
        dictionary.replaceKey("/Resources", pageResources);

        // The page's content: its own streams, untouched; on the first edit a `q` before them
        // and a `Q` after, so that whatever state they leave does not reach the ink; then one
        // stream per edit drawing its form. A replaced edit's stream goes, except for the `Q`
        // the first edit's carries, which stays where it was.
        QPDFObjectHandle contents = pageObject.getKey("/Contents");
        QPDFObjectHandle streams = QPDFObjectHandle::newArray();
        if (firstEdit) {
            QPDFObjectHandle opening = QPDFObjectHandle::newStream(&made, "q\n");
            streams.appendItem(opening);
            marker.replaceKey("/Open", opening);
        }
        for (auto &stream : contents.isArray() ? contents.getArrayAsVector() : std::vector<QPDFObjectHandle>{contents}) {
            if (stream.isNull()) continue;
            std::string drawn;
            bool closesPage = false;
            if (!droppedNames.empty() && drawsForm(stream, drawn, closesPage) && droppedNames.count(drawn)) {
                if (closesPage) streams.appendItem(QPDFObjectHandle::newStream(&made, "Q\n"));
                continue;
            }
            streams.appendItem(stream);
        }
        if (adds) {
            std::string draw = std::string(firstEdit ? "Q\n" : "") + "q\n" + placement(info) + "\n" + name + " Do\nQ\n";
            streams.appendItem(QPDFObjectHandle::newStream(&made, draw));
            forms.appendItem(form);
        }
        dictionary.replaceKey("/Contents", streams);

        // Ink as annotations: each has its own appearance (the ink an edit's form would draw,
        // placed on the page by the same matrix) and the drawing it was made from. The page's
        // other annotations stay as they are; those of ours a reopened drawing replaces go.
        if (!document->annotations.empty() || !document->droppedAnnotations.empty()) {
            QPDFObjectHandle existing = pageObject.getKey("/Annots");
            std::vector<QPDFObjectHandle> items;
            if (existing.isArray()) items = existing.getArrayAsVector();
            // Ours, another program's /Ink, or the /Popup of one: nothing else is ever taken off.
            for (int index : document->droppedAnnotations) {
                if (index < 0 || static_cast<size_t>(index) >= items.size() || !items[index].isDictionary() ||
                    !(items[index].getKey(kDrawingKey).isStream() || items[index].getKey("/Subtype").isNameAndEquals("/Ink") ||
                      items[index].getKey("/Subtype").isNameAndEquals("/Popup"))) {
                    throw Failure(PS_INTERNAL, "the page has no ink annotation at position " + std::to_string(index) + " to replace");
                }
            }
            QPDFObjectHandle annotations = QPDFObjectHandle::newArray();
            for (size_t index = 0; index < items.size(); ++index) {
                if (!document->droppedAnnotations.count(static_cast<int>(index))) annotations.appendItem(items[index]);
            }
            double m[6];
            placementMatrix(info, m);
            for (auto &pending : document->annotations) {
                QPDFObjectHandle annotation = QPDFObjectHandle::parse(pending.dictionary, "ink annotation");
                if (!annotation.isDictionary()) throw Failure(PS_INTERNAL, "an ink annotation that is not a dictionary");
                QPDFObjectHandle appearanceResources = QPDFObjectHandle::newDictionary();
                QPDFObjectHandle appearance = compressedStream(made, inkContent(document, made, info, pending.strokes, pending.overlay,
                                                                                appearanceResources, pending.overlayPage));
                // Only what a form needs beyond its defaults (/Type is optional, /Matrix is the
                // identity unless given, and a pen's outline uses no resource): a save writes one
                // such dictionary an annotation, uncompressed, and these were 56 bytes of each.
                QPDFObjectHandle appearanceDict = appearance.getDict();
                appearanceDict.replaceKey("/Subtype", QPDFObjectHandle::newName("/Form"));
                appearanceDict.replaceKey("/BBox", QPDFObjectHandle::newArray(QPDFObjectHandle::Rectangle(
                                                       pending.box[0], pending.box[1], pending.box[2], pending.box[3])));
                if (!(m[0] == 1 && m[1] == 0 && m[2] == 0 && m[3] == 1 && m[4] == 0 && m[5] == 0)) {
                    appearanceDict.replaceKey("/Matrix", QPDFObjectHandle::newArray(QPDFObjectHandle::Matrix(m[0], m[1], m[2], m[3], m[4], m[5])));
                }
                if (appearanceResources.getKeys().size() > 0) appearanceDict.replaceKey("/Resources", appearanceResources);
                QPDFObjectHandle states = QPDFObjectHandle::newDictionary();
                states.replaceKey("/N", appearance);
                annotation.replaceKey("/AP", states);
                annotation.replaceKey("/P", pageObject);
                QPDFObjectHandle source = smallestStream(made, pending.source);
                source.getDict().replaceKey("/Type", QPDFObjectHandle::newName("/CanvasBridgeDrawing"));
                annotation.replaceKey(kDrawingKey, source);
                annotations.appendItem(made.makeIndirectObject(annotation));
            }
            dictionary.replaceKey("/Annots", annotations);
        }

        // (An edit of annotations alone leaves no /Forms behind: the page is not bracketed yet.)
        if (adds || !marker.getKey("/Forms").isNull()) marker.replaceKey("/Forms", forms);
        // A running count of the ink on the page, so a limit on it costs one number to read.
        QPDFObjectHandle counted = marker.getKey("/Points");
        long long before = counted.isInteger() ? std::max(0LL, counted.getIntValue()) : 0;
        before = std::max(0LL, before - std::max(0LL, document->droppedPoints));
        long long after = before > LLONG_MAX - document->addedPoints ? LLONG_MAX : before + document->addedPoints;
        marker.replaceKey("/Points", QPDFObjectHandle::newInteger(after));
        dictionary.replaceKey(kMarker, marker);
        return dictionary;
}

// Writes objects for an appended update: the document's own keep their numbers, the scratch
// document's objects numbered from `firstNumber` in the order made.
class Renumbering {
  public:
    Renumbering(QPDF &scratch, int firstMade, int firstNumber) : scratch_(scratch), firstMade_(firstMade), firstNumber_(firstNumber) {}

    int number(QPDFObjectHandle const &h) {
        int id = h.getObjGen().getObj();
        return h.getOwningQPDF() == &scratch_ ? firstNumber_ + (id - firstMade_) : id;
    }

    // The object as PDF syntax: its direct values written out, indirect ones as references
    // (`h` itself written out even when indirect, with `whole`).
    void write(QPDFObjectHandle h, std::string &out, bool whole = false) {
        if (h.isIndirect() && !whole) {
            out += std::to_string(number(h)) + " " + std::to_string(h.getObjGen().getGen()) + " R";
        } else if (h.isDictionary()) {
            out += "<< ";
            for (auto &entry : h.getDictAsMap()) {
                out += QPDFObjectHandle::newName(entry.first).unparse();
                out += ' ';
                write(entry.second, out);
                out += ' ';
            }
            out += ">>";
        } else if (h.isArray()) {
            out += "[ ";
            for (auto &item : h.getArrayAsVector()) {
                write(item, out);
                out += ' ';
            }
            out += "]";
        } else {
            out += h.unparseResolved();
        }
    }

    // An indirect object's body: its dictionary, and for a stream its data as stored.
    std::string body(QPDFObjectHandle h) {
        std::string out;
        if (!h.isStream()) {
            write(h, out, true);
            return out;
        }
        std::shared_ptr<Buffer> data = h.getRawStreamData();
        QPDFObjectHandle dict = entriesOf(h.getDict());
        dict.replaceKey("/Length", QPDFObjectHandle::newInteger(static_cast<long long>(data->getSize())));
        write(dict, out);
        out += "\nstream\n";
        out.append(reinterpret_cast<char const *>(data->getBuffer()), data->getSize());
        out += "\nendstream";
        return out;
    }

  private:
    QPDF &scratch_;
    int firstMade_, firstNumber_;
};

// A document's version as its header and its catalog's /Version say it (the later of the
// two), older than 1.5: one whose updates may not use object streams without saying so.
bool olderThan15(QPDF &pdf) {
    auto older = [](std::string const &version) {
        int major = 0, minor = 0;
        if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) < 1) return true;
        return major < 1 || (major == 1 && minor < 5);
    };
    QPDFObjectHandle stated = pdf.getRoot().getKey("/Version");
    return older(pdf.getPDFVersion()) && !(stated.isName() && !older(stated.getName().substr(1)));
}

// The objects of one appended update and the cross-reference section that lists them. Each
// is written plain ("N G obj ... endobj"), or, when the update packs and the object may go in
// one (a dictionary of generation 0), inside an object stream: Flate-compressed with its
// neighbours, listed by a cross-reference stream. An /InkList's numbers as plain text cost
// about 14 bytes a point; packed, about 5.
class UpdateSection {
  public:
    UpdateSection(qpdf_offset_t base, bool pack) : base_(base), pack_(pack) {}

    void add(int id, int generation, std::string body, bool packable) {
        if (pack_ && packable && generation == 0 && body.size() <= kMaxStreamText) {
            packed_.push_back({id, 0, std::move(body)});
        } else {
            plain_.push_back({id, generation, std::move(body)});
        }
    }
    bool packs() const { return !packed_.empty(); }
    // Everything plain after all (a document whose catalog cannot say 1.5).
    void unpack() {
        for (auto &object : packed_) plain_.push_back(std::move(object));
        packed_.clear();
    }

    // The update's bytes: its objects, then a cross-reference table (as the document's own
    // last section is one, and nothing was packed) or stream, the trailer, startxref, %%EOF.
    // New numbers (object streams, the cross-reference stream) are taken from `size` on.
    std::string finish(int size, QPDFObjectHandle trailer, qpdf_offset_t previous, bool xrefIsStream) {
        out_ = "\n";
        for (auto const &object : plain_) emit(object.id, object.generation, object.body);
        for (size_t next = 0; next < packed_.size();) {
            int self = newNumber(size);
            std::string offsets, bodies;
            int count = 0;
            for (; next < packed_.size() && count < kMaxStreamObjects; ++next, ++count) {
                Object const &object = packed_[next];
                if (count > 0 && bodies.size() + object.body.size() > kMaxStreamText) break;
                offsets += std::to_string(object.id) + " " + std::to_string(bodies.size()) + " ";
                bodies += object.body + "\n";
                entries_[object.id] = {2, static_cast<unsigned long long>(self), count};
            }
            offsets += "\n";
            std::shared_ptr<Buffer> data = deflated(offsets + bodies);
            emit(self, 0, "<< /Type /ObjStm /N " + std::to_string(count) + " /First " + std::to_string(offsets.size()) +
                              " /Filter /FlateDecode /Length " + std::to_string(data->getSize()) + " >>\nstream\n" +
                              std::string(reinterpret_cast<char const *>(data->getBuffer()), data->getSize()) + "\nendstream");
        }
        QPDFObjectHandle next = QPDFObjectHandle::newDictionary();
        for (char const *key : {"/Root", "/Info", "/ID"}) {
            if (!trailer.getKey(key).isNull()) next.replaceKey(key, trailer.getKey(key));
        }
        next.replaceKey("/Prev", QPDFObjectHandle::newInteger(previous));
        qpdf_offset_t xrefAt = base_ + static_cast<qpdf_offset_t>(out_.size());
        if (!xrefIsStream && packed_.empty()) {
            out_ += "xref\n";
            for (auto const &run : runs()) {
                out_ += std::to_string(run.first) + " " + std::to_string(run.second) + "\n";
                for (int id = run.first; id < run.first + run.second; ++id) {
                    char line[32];
                    std::snprintf(line, sizeof line, "%010llu %05d n\r\n", entries_[id].field2, std::min(entries_[id].field3, 65535));
                    out_ += line;
                }
            }
            next.replaceKey("/Size", QPDFObjectHandle::newInteger(size));
            out_ += "trailer\n" + next.unparse() + "\n";
        } else {
            // The section lists itself, so that older readers and newer ones agree.
            int self = newNumber(size);
            entries_[self] = {1, static_cast<unsigned long long>(xrefAt), 0};
            unsigned long long widest = 0;
            int widestIndex = 0;
            for (auto const &entry : entries_) {
                widest = std::max(widest, entry.second.field2);
                widestIndex = std::max(widestIndex, entry.second.field3);
            }
            int w2 = 1, w3 = 1;
            while (w2 < 8 && (widest >> (8 * w2)) != 0) ++w2;
            while (w3 < 2 && (static_cast<unsigned>(widestIndex) >> (8 * w3)) != 0) ++w3;
            std::string rows;
            QPDFObjectHandle index = QPDFObjectHandle::newArray();
            for (auto const &run : runs()) {
                index.appendItem(QPDFObjectHandle::newInteger(run.first));
                index.appendItem(QPDFObjectHandle::newInteger(run.second));
                for (int id = run.first; id < run.first + run.second; ++id) {
                    Entry const &entry = entries_[id];
                    rows.push_back(static_cast<char>(entry.type));
                    bigEndian(rows, entry.field2, w2);
                    bigEndian(rows, static_cast<unsigned long long>(std::min(entry.field3, 65535)), w3);
                }
            }
            std::shared_ptr<Buffer> data = deflated(rows);
            QPDFObjectHandle widths = QPDFObjectHandle::newArray();
            for (int w : {1, w2, w3}) widths.appendItem(QPDFObjectHandle::newInteger(w));
            next.replaceKey("/Type", QPDFObjectHandle::newName("/XRef"));
            next.replaceKey("/Size", QPDFObjectHandle::newInteger(size));
            next.replaceKey("/Index", index);
            next.replaceKey("/W", widths);
            next.replaceKey("/Filter", QPDFObjectHandle::newName("/FlateDecode"));
            next.replaceKey("/Length", QPDFObjectHandle::newInteger(static_cast<long long>(data->getSize())));
            out_ += std::to_string(self) + " 0 obj\n" + next.unparse() + "\nstream\n" +
                    std::string(reinterpret_cast<char const *>(data->getBuffer()), data->getSize()) + "\nendstream\nendobj\n";
        }
        out_ += "startxref\n" + std::to_string(xrefAt) + "\n%%EOF\n";
        return std::move(out_);
    }

  private:
    // An object stream's text at most (objects larger stay plain): with every value taking two
    // bytes or more, and kMaxStreamObjects objects' two header values, far fewer values than
    // the kMaxObjectStreamValues a reader of ours accepts.
    static constexpr size_t kMaxStreamText = size_t(256) << 10;
    static constexpr int kMaxStreamObjects = 200;
    static_assert(kMaxStreamText / 2 + 2 * kMaxStreamObjects < kMaxObjectStreamValues, "our own object streams must read back");

    struct Object {
        int id, generation;
        std::string body;
    };
    // A cross-reference entry: type 1 (offset, generation) or 2 (object stream, index).
    struct Entry {
        int type;
        unsigned long long field2;
        int field3;
    };

    int newNumber(int &size) {
        if (size >= INT_MAX) throw Failure(PS_DAMAGED, "the document's object numbers leave no room for new objects");
        return size++;
    }
    void emit(int id, int generation, std::string const &body) {
        entries_[id] = {1, static_cast<unsigned long long>(base_ + static_cast<qpdf_offset_t>(out_.size())), generation};
        out_ += std::to_string(id) + " " + std::to_string(generation) + " obj\n" + body + "\nendobj\n";
    }
    // The entries as subsections of consecutive numbers: (first, count).
    std::vector<std::pair<int, int>> runs() const {
        std::vector<std::pair<int, int>> result;
        for (auto const &entry : entries_) {
            if (!result.empty() && result.back().first + result.back().second == entry.first) {
                ++result.back().second;
            } else {
                result.push_back({entry.first, 1});
            }
        }
        return result;
    }

    qpdf_offset_t base_;
    bool pack_;
    std::vector<Object> plain_, packed_;
    std::map<int, Entry> entries_;
    std::string out_;
};

}  // namespace

extern "C" {

ps_status ps_flatten_increment(ps_document *document, int page, const unsigned char *overlay, size_t overlay_length,
                               const unsigned char *strokes, size_t strokes_length,
                               const unsigned char *drawing, size_t drawing_length, unsigned char **bytes, size_t *length,
                               ps_error *error) {
    *bytes = nullptr;
    *length = 0;
    // What qpdf throws here comes from the input's structure (our own faults are Failures with
    // PS_INTERNAL): the document is damaged, as far as a client can tell.
    return guardedOn(document, error, PS_DAMAGED, [&] {
        if (document->needs_rewrite) throw Failure(PS_INTERNAL, "this document must be rewritten whole, not appended to");
        bool xrefIsStream = false;
        qpdf_offset_t previousXref = lastStartXref(document, xrefIsStream);
        QPDF &pdf = *document->pdf;
        QPDFObjectHandle trailer = pdf.getTrailer();
        QPDF scratch;
        scratch.emptyPDF();
        int firstMade = static_cast<int>(scratch.getObjectCount()) + 1;
        QPDFObjectHandle dictionary = applyInk(document, scratch, page, overlay, overlay_length, strokes, strokes_length, drawing, drawing_length);
        int lastMade = static_cast<int>(scratch.getObjectCount());
        // New objects are numbered after every number the document's cross-reference sections
        // use and after its /Size (which the PDF says is one past the highest number).
        int firstNumber = trailer.getKey("/Size").isInteger() ? std::max(1, trailer.getKey("/Size").getIntValueAsInt()) : 1;
        std::map<QPDFObjGen, QPDFXRefEntry> table = pdf.getXRefTable();
        if (!table.empty()) firstNumber = std::max(firstNumber, table.rbegin()->first.getObj() + 1);
        if (lastMade - firstMade >= INT_MAX - firstNumber) throw Failure(PS_DAMAGED, "the document's object numbers leave no room for new objects");
        Renumbering numbering(scratch, firstMade, firstNumber);

        // Objects to write: the page, and every object made for this edit. Ink annotations are
        // many small dictionaries, their /InkList long runs of numbers: they go into object
        // streams, compressed, where that is possible (5.3's size; paper's few objects stay plain).
        QPDFObjectHandle pageObject = pageAt(document, page).getObjectHandle();
        UpdateSection section(document->size, !document->annotations.empty());
        std::string pageBody;
        numbering.write(dictionary, pageBody);
        section.add(pageObject.getObjGen().getObj(), pageObject.getObjGen().getGen(), pageBody, true);
        for (int id = firstMade; id <= lastMade; ++id) {
            QPDFObjectHandle h = scratch.getObjectByID(id, 0);
            // (An id that only points at an object made under another id is not written twice.)
            if (!h.isNull() && h.getObjGen().getObj() == id) section.add(numbering.number(h), 0, numbering.body(h), !h.isStream());
        }
        int lastNew = firstNumber + (lastMade - firstMade);
        int size = std::max(lastNew + 1, trailer.getKey("/Size").isInteger() ? trailer.getKey("/Size").getIntValueAsInt() : 0);
        QPDFObjectHandle root = trailer.getKey("/Root");
        // Object streams and the cross-reference stream that lists them are PDF 1.5: a document
        // that says it is older says 1.5 from this update on (its catalog's /Version; the
        // header is never rewritten).
        if (section.packs() && !xrefIsStream && olderThan15(pdf)) {
            if (!root.isIndirect() || !root.isDictionary()) {
                section.unpack();
            } else {
                QPDFObjectHandle catalog = entriesOf(root);
                catalog.replaceKey("/Version", QPDFObjectHandle::newName("/1.5"));
                std::string catalogBody;
                numbering.write(catalog, catalogBody);
                section.add(root.getObjGen().getObj(), root.getObjGen().getGen(), catalogBody, true);
            }
        }
        std::string out = section.finish(size, trailer, previousXref, xrefIsStream);
        handOver(out, bytes, length);
    });
}

ps_status ps_flatten_rewrite(ps_document *document, int page, const unsigned char *overlay, size_t overlay_length,
                             const unsigned char *strokes, size_t strokes_length,
                             const unsigned char *drawing, size_t drawing_length, int fd, ps_error *error) {
    // What qpdf throws here comes from the input's structure (our own faults are Failures with
    // PS_INTERNAL): the document is damaged, as far as a client can tell.
    return guardedOn(document, error, PS_DAMAGED, [&] {
        QPDFObjectHandle dictionary = applyInk(document, *document->pdf, page, overlay, overlay_length, strokes, strokes_length,
                                               drawing, drawing_length);
        QPDFObjectHandle pageObject = pageAt(document, page).getObjectHandle();
        for (auto &entry : dictionary.getDictAsMap()) pageObject.replaceKey(entry.first, entry.second);
        DescriptorPipeline out(fd);
        QPDFWriter writer(*document->pdf);
        writer.setOutputPipeline(&out);
        try {
            writer.write();
        } catch (QPDFExc const &error) {
            // qpdf gives up on objects it cannot read back even after repair: damaged input.
            throw Failure(PS_DAMAGED, std::string("the PDF cannot be rewritten: ") + error.what());
        }
    });
}

int ps_needs_rewrite(ps_document *document) { return document->needs_rewrite ? 1 : 0; }

int64_t ps_page_ink_points(ps_document *document, int page) {
    try {
        QPDFObjectHandle marker = pageAt(document, page).getObjectHandle().getKey(kMarker);
        if (!marker.isDictionary()) return 0;
        QPDFObjectHandle counted = marker.getKey("/Points");
        return counted.isInteger() ? std::max(0LL, counted.getIntValue()) : 0;
    } catch (...) {
        return 0;
    }
}

void ps_add_ink_points(ps_document *document, int64_t points) { document->addedPoints = std::max<int64_t>(0, points); }

void ps_set_budget(ps_document *document, int64_t budget_ms) {
    if (document->region) document->region->setBudget(budget_ms);
}

void ps_free(void *bytes) { std::free(bytes); }


}  // extern "C"
