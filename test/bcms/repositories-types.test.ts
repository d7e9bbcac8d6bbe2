/**
 * Type-level tests of the plugin repositories (`npm run typecheck` fails when they break): written
 * the way BCMS plugins write their repository files, with and without type arguments, assigned to
 * the union type they declare.
 */
import { expectTypeOf } from 'expect-type';
import {
  BCMSConfig,
  BCMSRepo,
  createFSDBRepository,
  createMongoDBCachedRepository,
  FSDBEntitySchema,
  objectSchemaToMongoDBSchema,
  type BCMSEntry,
  type BCMSTemplate,
  type FSDBEntity,
  type FSDBRepository,
  type MongoDBCachedRepository,
  type ObjectSchema,
} from '../../lib';

interface Book extends FSDBEntity {
  title: string;
  pages: number;
  shelves: string[];
}

const BookSchema: ObjectSchema = {
  ...FSDBEntitySchema,
  title: { __type: 'string', __required: true },
  pages: { __type: 'number', __required: true },
  shelves: { __type: 'array', __required: true, __child: { __type: 'string' } },
};

interface BookMethods {
  findByTitle(title: string): Promise<Book | null>;
  findAllOnShelf(shelf: string): Promise<Book[]>;
}

type BookRepo = FSDBRepository<Book, BookMethods> | MongoDBCachedRepository<Book, BookMethods>;

// biome-ignore lint/complexity/noStaticOnlyClass: BCMS plugins' static Repo, whose typing this test checks
class Repo {
  static book: BookRepo;
}

describe('plugin repositories, typed', () => {
  test('without type arguments, the union a plugin declares types the methods factory', () => {
    const build = () => {
      if (BCMSConfig.database.fs) {
        Repo.book = createFSDBRepository({
          name: 'Books',
          collection: `${BCMSConfig.database.prefix}_books`,
          schema: BookSchema,
          methods({ repo }) {
            return {
              async findByTitle(title) {
                expectTypeOf(title).toEqualTypeOf<string>();
                return await repo.findBy((book) => book.title === title);
              },
              async findAllOnShelf(shelf) {
                return await repo.findAllBy({ shelves: shelf });
              },
            };
          },
        });
      } else {
        Repo.book = createMongoDBCachedRepository<Book, BookMethods, unknown>({
          name: 'Books',
          collection: `${BCMSConfig.database.prefix}_books`,
          schema: objectSchemaToMongoDBSchema(BookSchema),
          methods({ mongoDBInterface, cacheHandler }) {
            return {
              async findByTitle(title) {
                const hit = cacheHandler.findOne((book) => book.title === title);
                if (hit) return hit;
                const found = await mongoDBInterface.findOne({ title });
                if (found) cacheHandler.set(found._id, found);
                return found;
              },
              async findAllOnShelf(shelf) {
                const items = await mongoDBInterface.find({ shelves: shelf }).limit(10).skip(0);
                items.forEach((book) => {
                  cacheHandler.set(book._id, book);
                });
                return items;
              },
            };
          },
        });
      }
    };
    expectTypeOf(build).returns.toEqualTypeOf<void>();
    expectTypeOf<BookRepo['findAll']>().returns.resolves.toEqualTypeOf<Book[]>();
    expectTypeOf<BookRepo['methods']['findByTitle']>().returns.resolves.toEqualTypeOf<Book | null>();
    // A whole entity (as BCMS plugins pass it) or one without its id and times.
    expectTypeOf<BookRepo['add']>().toBeCallableWith({ _id: '', createdAt: 0, updatedAt: 0, title: 't', pages: 1, shelves: [] });
    expectTypeOf<BookRepo['add']>().toBeCallableWith({ title: 't', pages: 1, shelves: [] });
    expectTypeOf<BookRepo['findAllBy']>().toBeCallableWith({ pages: { $gte: 100 } });
    expectTypeOf<BookRepo['updateMany']>().toBeCallableWith(
      (book: Book) => book.pages > 1,
      (book: Book) => book,
    );
  });

  test("BCMSRepo's entities are BCMS's shapes", () => {
    expectTypeOf(BCMSRepo.entry.findById).returns.resolves.toEqualTypeOf<BCMSEntry | null>();
    expectTypeOf(BCMSRepo.template.methods.findByName).returns.resolves.toEqualTypeOf<BCMSTemplate | null>();
    expectTypeOf<BCMSEntry['cid']>().toEqualTypeOf<string>();
  });
});
