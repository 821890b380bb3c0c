import Foundation
import ObjectGraph

// Four versions of a shop's model, kept in code as a daemon keeps them: each in its own
// namespace, each entity keeping its name across versions.

/// Sizes as version 1 stored them.
struct ShopDimensionsV1: Codable, Sendable, Hashable {
    var w = 0
    var h = 0
}

/// Sizes as version 2 stores them: renamed keys and a unit, which version 1's JSON lacks.
struct ShopDimensionsV2: Codable, Sendable, Hashable {
    var width = 0
    var height = 0
    var unit = "mm"
}

/// A product's state, an enum from version 2 on (a string before).
enum ShopProductStatus: String, Codable, Sendable {
    case active, retired
}

enum ShopV1: VersionedSchema {
    static let versionIdentifier = "1"
    static var models: [any Entity.Type] { [Product.self, Category.self, Legacy.self] }

    @Entity final class Product {
        var name: String = ""
        var sizeKB: Int = 0
        var vendor: String = ""
        var fullName: String = ""
        var status: String = "active"
        var dimensions: ShopDimensionsV1 = ShopDimensionsV1()
        @Relationship(inverse: "products") var category: Category?
    }

    @Entity final class Category {
        var title: String = ""
        @Relationship(inverse: "category") var products: [Product]
    }

    /// Renamed `Archive` in version 2.
    @Entity final class Legacy {
        var note: String = ""
    }
}

enum ShopV2: VersionedSchema {
    static let versionIdentifier = "2"
    static var models: [any Entity.Type] { [Product.self, Category.self, Vendor.self, Archive.self] }

    @Entity final class Product {
        /// Unique from this version on: the stage resolves the duplicates version 1 allowed.
        @Attribute(.unique) var name: String = ""
        /// An Int of kilobytes before, a string with its unit now.
        var sizeKB: String = ""
        /// A string before, a relationship now.
        @Relationship(inverse: "products") var vendor: Vendor?
        /// `fullName` split in two.
        var firstName: String = ""
        var lastName: String = ""
        /// A string before, an enum now.
        var status: ShopProductStatus = .active
        /// A new non-optional attribute, filled from old values.
        var code: String = ""
        /// A Codable type whose shape changed.
        var dimensions: ShopDimensionsV2 = ShopDimensionsV2()
        /// A to-one before, a to-many now.
        @Relationship(inverse: "products") var categories: [Category]
    }

    @Entity final class Category {
        var title: String = ""
        @Relationship(inverse: "categories") var products: [Product]
    }

    @Entity final class Vendor {
        @Attribute(.unique) var name: String = ""
        @Relationship(inverse: "vendor") var products: [Product]
    }

    @Entity final class Archive {
        var note: String = ""
    }
}

enum ShopV3: VersionedSchema {
    static let versionIdentifier = "3"
    static var models: [any Entity.Type] { [Product.self, Category.self, Vendor.self, Archive.self] }

    @Entity final class Product {
        @Attribute(.unique) var name: String = ""
        var sizeKB: String = ""
        @Relationship(inverse: "products") var vendor: Vendor?
        /// `firstName` and `lastName` merged back into one.
        var displayName: String = ""
        var status: ShopProductStatus = .active
        var code: String = ""
        var dimensions: ShopDimensionsV2 = ShopDimensionsV2()
        @Relationship(inverse: "products") var categories: [Category]
    }

    @Entity final class Category {
        var title: String = ""
        @Relationship(inverse: "categories") var products: [Product]
    }

    @Entity final class Vendor {
        @Attribute(.unique) var name: String = ""
        @Relationship(inverse: "vendor") var products: [Product]
    }

    @Entity final class Archive {
        var note: String = ""
    }
}

/// Version 4 adds an attribute with a default: a lightweight stage.
enum ShopV4: VersionedSchema {
    static let versionIdentifier = "4"
    static var models: [any Entity.Type] { [Product.self, Category.self, Vendor.self, Archive.self] }

    @Entity final class Product {
        @Attribute(.unique) var name: String = ""
        var sizeKB: String = ""
        @Relationship(inverse: "products") var vendor: Vendor?
        var displayName: String = ""
        var status: ShopProductStatus = .active
        var code: String = ""
        var dimensions: ShopDimensionsV2 = ShopDimensionsV2()
        @Relationship(inverse: "products") var categories: [Category]
        var stock: Int = 5
    }

    @Entity final class Category {
        var title: String = ""
        @Relationship(inverse: "categories") var products: [Product]
    }

    @Entity final class Vendor {
        @Attribute(.unique) var name: String = ""
        @Relationship(inverse: "vendor") var products: [Product]
    }

    @Entity final class Archive {
        var note: String = ""
    }
}

/// The custom stage from version 1 to 2: every kind of change a stage makes.
let shopStageOneToTwo = MigrationStage.custom(fromVersion: ShopV1.self, toVersion: ShopV2.self) { migration in
    let old = migration.old
    let new = migration.new
    // Vendors: one object per distinct vendor string (a string becomes a relationship).
    var vendors: [String: ShopV2.Vendor] = [:]
    for product in try old.fetch(FetchDescriptor<ShopV1.Product>()) {
        guard let copy = try migration.counterpart(of: product, as: ShopV2.Product.self) else { continue }
        // Delete objects.
        if product.status == "deleted" {
            new.delete(copy)
            continue
        }
        // Int → String.
        copy.sizeKB = "\(product.sizeKB) kB"
        // String → enum.
        copy.status = ShopProductStatus(rawValue: product.status) ?? .retired
        // Split one attribute into two.
        let parts = product.fullName.split(separator: " ", maxSplits: 1)
        copy.firstName = parts.first.map(String.init) ?? ""
        copy.lastName = parts.count > 1 ? String(parts[1]) : ""
        // A new non-optional attribute from old values.
        copy.code = "\(product.name.uppercased())-\(product.sizeKB)"
        // A Codable value of the old shape, written in the new one.
        copy.dimensions = ShopDimensionsV2(width: product.dimensions.w, height: product.dimensions.h, unit: "mm")
        // A string to a relationship.
        if !product.vendor.isEmpty {
            let vendor: ShopV2.Vendor
            if let known = vendors[product.vendor] {
                vendor = known
            } else {
                vendor = try new.insert(ShopV2.Vendor.self)
                vendor.name = product.vendor
                vendors[product.vendor] = vendor
            }
            copy.vendor = vendor
        }
        // A to-one into a to-many.
        if let category = product.category,
            let newCategory = try migration.counterpart(of: category, as: ShopV2.Category.self)
        {
            copy.categories = [newCategory]
        }
    }
    // A new unique constraint: duplicates resolved by keeping the oldest and renaming the rest.
    var seen: Set<String> = []
    for product in try new.fetch(FetchDescriptor<ShopV2.Product>()).sorted(by: {
        $0.objectID!.serial < $1.objectID!.serial
    }) where !seen.insert(product.name).inserted {
        product.name += " (\(product.objectID!.serial))"
    }
    // Rename an entity: Legacy's objects become Archive's.
    for legacy in try old.fetch(FetchDescriptor<ShopV1.Legacy>()) {
        let archive = try new.insert(ShopV2.Archive.self)
        archive.note = legacy.note
    }
}

/// The custom stage from version 2 to 3: two attributes merged into one.
let shopStageTwoToThree = MigrationStage.custom(fromVersion: ShopV2.self, toVersion: ShopV3.self) { migration in
    for product in try migration.old.fetch(FetchDescriptor<ShopV2.Product>()) {
        guard let copy = try migration.counterpart(of: product, as: ShopV3.Product.self) else { continue }
        copy.displayName = [product.firstName, product.lastName].filter { !$0.isEmpty }.joined(separator: " ")
    }
}

enum ShopPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self, ShopV3.self, ShopV4.self] }
    static var stages: [MigrationStage] {
        [
            shopStageOneToTwo, shopStageTwoToThree,
            .lightweight(fromVersion: ShopV3.self, toVersion: ShopV4.self),
        ]
    }
}

/// The plan up to version 2 only.
enum ShopPlanToTwo: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self] }
    static var stages: [MigrationStage] { [shopStageOneToTwo] }
}
