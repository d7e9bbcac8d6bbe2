import { createHash, timingSafeEqual } from 'node:crypto';
import type { Registry } from 'prom-client';
import { createController, createControllerMethod } from './plugin/create';
import { createJwtProtectionPreRequestHandler, documentGuard } from './plugin/guard';
import type { BcmsController, PreRequestContext } from './plugin/types';
import { bearerToken } from './security/token-cache';
import { JWTPermissionName, JWTRoleName } from './security/token';

const admin = createJwtProtectionPreRequestHandler([JWTRoleName.ADMIN], JWTPermissionName.READ);

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/**
 * `GET /api/extensions/metrics` (the `metrics` option): the registry in Prometheus's text format,
 * for an ADMIN token, or for `metrics.token` sent as a bearer token (a scraper has no user).
 */
export function metricsController(registry: Registry, token: string | undefined): BcmsController {
  const expected = token === undefined ? undefined : digest(token);
  // Said to be the ADMIN guard in the OpenAPI document: a bearer token either way.
  const scraperOrAdmin = documentGuard(
    (context: PreRequestContext): unknown => {
      const sent = bearerToken(context.request);
      // Compared as digests: the same length whatever was sent, so the time taken says nothing of the token.
      if (expected !== undefined && sent !== undefined && timingSafeEqual(digest(sent), expected)) return {};
      return admin(context);
    },
    { rule: { roles: [JWTRoleName.ADMIN], permission: JWTPermissionName.READ } },
  );
  return createController({
    name: 'Metrics',
    path: '/metrics',
    methods: () => ({
      read: createControllerMethod({
        type: 'get',
        preRequestHandler: scraperOrAdmin,
        doc: { summary: "This service's metrics in Prometheus's text format (an ADMIN token, or the metrics option's token)." },
        handler: async ({ response }) => {
          const text = await registry.metrics();
          response.setHeader('Content-Type', registry.contentType);
          response.setHeader('Cache-Control', 'no-store');
          response.end(text);
        },
      }),
    }),
  });
}
