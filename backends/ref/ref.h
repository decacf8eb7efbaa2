/* The reference backend: plain C, no vendor library, dot products accumulated
 * in double. It is the oracle every other backend is compared with. */
#ifndef GENFENCE_BACKEND_REF_H
#define GENFENCE_BACKEND_REF_H

#include "genfence/backend.h"

const gf_backend_ops *gf_backend_ref(void);

#endif
