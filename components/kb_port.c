/* kb_port.c — making and binding the typed ports of component modules */
#include "kb_port.h"

#include <stdio.h>
#include <string.h>

#include "kb_err.h"

struct sim_port *kb_port_new(struct sim *s, const char *owner, const char *unit,
                             const char *port, enum sim_port_dir dir, const char *type,
                             int min_bind, int max_bind, char *err, size_t errlen)
{
    /* "owner.unit.port", truncated to the buffer as snprintf would; no
     * printf: the fabric makes four ports a link */
    char name[256];
    const char *part[3] = {owner && *owner ? owner : NULL, unit, port};
    size_t k = 0;
    for (int i = 0; i < 3; i++) {
        if (!part[i])
            continue;
        if (k && k < sizeof name - 1)
            name[k++] = '.';
        size_t l = strlen(part[i]);
        if (l > sizeof name - 1 - k)
            l = sizeof name - 1 - k;
        memcpy(name + k, part[i], l);
        k += l;
    }
    name[k] = 0;
    struct sim_port *p = sim_port_new(s, name, dir, type, min_bind, max_bind);
    if (!p)
        kb_errf(err, errlen, "port '%s': %s", name, sim_errmsg(s));
    return p;
}

struct sim_port *kb_port_export(struct sim *s, const char *owner, const char *unit,
                                const char *type, void *iface, int max_bind, char *err,
                                size_t errlen)
{
    struct sim_port *p =
        kb_port_new(s, owner, unit, "in", SIM_PORT_IN, type, 0, max_bind, err, errlen);
    if (p)
        sim_port_set_iface(p, iface);
    return p;
}

int kb_port_bind(struct sim *s, struct sim_port *from, struct sim_port *to, char *err,
                 size_t errlen)
{
    int rc = sim_port_bind(from, to);
    if (rc < 0)
        kb_errf(err, errlen, "%s", sim_errmsg(s));
    return rc;
}
