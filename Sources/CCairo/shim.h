#include <cairo/cairo.h>
#include <cairo/cairo-pdf.h>
