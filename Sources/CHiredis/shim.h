// hiredis, the C client of Redis: session snapshots when canvasd runs as several instances.
#include <hiredis/hiredis.h>
